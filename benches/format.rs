//! Criterion benchmarks for the deletion-vector wire formats.
//!
//! Run with `cargo bench --bench format` (see `benches/README.md`).
//!
//! Datasets are built once, before any measurement:
//!
//! | name       | rows deleted                                         |
//! |------------|------------------------------------------------------|
//! | `sparse`   | ~0.1% of the universe, pseudo-random (fixed seed)    |
//! | `dense`    | ~50% of the universe, pseudo-random (fixed seed)     |
//! | `runs`     | 1,000 consecutive rows out of every 10,000           |
//! | `runs_rle` | `runs`, with roaring run containers (`optimize()`)   |
//!
//! each over a universe of 1M and 10M rows. `runs` is what a set built row by
//! row gives (e.g. `DeletionVector(numpy_array)`: no run optimisation, so
//! bitmap containers); `runs_rle` holds the same rows in run containers, as
//! written by run-optimising writers (e.g. Spark) or built with `insert_range`.
//!
//! Benchmarks:
//!
//! * `bitmap_serialize/<universe>/<set>`: `format::bitmap::serialize`
//! * `bitmap_deserialize/<universe>/<set>`: `format::bitmap::deserialize`
//!   (checked decode, builds a `RoaringTreemap`)
//! * `dv_file/read_dv/1M/dense`: `format::file::read_dv` of a one-DV file
//!   (frame checks + CRC-32 + checked decode + cardinality check)
//! * `z85/{encode,decode}/2048B`: `codec::z85` on 2 KiB of pseudo-random
//!   bytes, next to the `z85` crate for reference.
//!
//! Throughput is in serialized bytes (the RoaringBitmapArray, or the z85
//! input bytes), so encode and decode figures are comparable.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use deltadv::codec::z85;
use deltadv::format::bitmap::{deserialize, serialize, serialized_size};
use deltadv::format::file::{read_dv, DvFileWriter};
use deltadv::RoaringTreemap;

const SEED: u64 = 0x5EED_DE17_A0DD_1234;

/// xorshift64* — good enough for benchmark data, no extra crates.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Each row in `0..universe` kept with probability `1 / one_in`.
fn bernoulli(universe: u64, one_in: u64, seed: u64) -> RoaringTreemap {
    let mut rng = XorShift(seed);
    RoaringTreemap::from_sorted_iter((0..universe).filter(|_| rng.next().is_multiple_of(one_in)))
        .unwrap()
}

/// Runs of `run` deleted rows at the start of every `period` rows, inserted
/// row by row (as `DeletionVector(numpy_array)` does): bitmap/array containers.
/// (`insert_range` would give run containers directly.)
fn runs(universe: u64, run: u64, period: u64) -> RoaringTreemap {
    RoaringTreemap::from_sorted_iter((0..universe).filter(|r| r % period < run)).unwrap()
}

/// The same set with every 32-bit bucket run-optimised.
fn run_optimized(map: &RoaringTreemap) -> RoaringTreemap {
    RoaringTreemap::from_bitmaps(map.bitmaps().map(|(key, bitmap)| {
        let mut bitmap = bitmap.clone();
        bitmap.optimize();
        (key, bitmap)
    }))
}

struct Dataset {
    universe: &'static str,
    name: &'static str,
    map: RoaringTreemap,
    bytes: Vec<u8>,
}

fn datasets() -> Vec<Dataset> {
    let mut out = Vec::new();
    for (universe, label) in [(1_000_000u64, "1M"), (10_000_000u64, "10M")] {
        let runs_map = runs(universe, 1_000, 10_000);
        let sets = [
            ("sparse", bernoulli(universe, 1_000, SEED ^ universe)),
            (
                "dense",
                bernoulli(universe, 2, SEED ^ universe.rotate_left(17)),
            ),
            ("runs", runs_map.clone()),
            ("runs_rle", run_optimized(&runs_map)),
        ];
        for (name, map) in sets {
            let bytes = serialize(&map).unwrap();
            assert_eq!(bytes.len(), serialized_size(&map));
            assert_eq!(deserialize(&bytes).unwrap(), map);
            out.push(Dataset {
                universe: label,
                name,
                map,
                bytes,
            });
        }
    }
    out
}

/// Short, fixed budgets so the whole run stays well under 3 minutes.
fn configure(group: &mut BenchmarkGroup<'_, WallTime>, universe: &str) {
    group.warm_up_time(Duration::from_millis(500));
    if universe == "10M" {
        group.sample_size(10);
        group.measurement_time(Duration::from_secs(2));
    } else {
        group.sample_size(30);
        group.measurement_time(Duration::from_secs(2));
    }
}

fn bench_bitmap(c: &mut Criterion) {
    let sets = datasets();
    for d in &sets {
        eprintln!(
            "dataset {}/{}: {} rows, {} bytes serialized",
            d.universe,
            d.name,
            d.map.len(),
            d.bytes.len()
        );
    }
    for d in &sets {
        let mut group = c.benchmark_group(format!("bitmap_serialize/{}", d.universe));
        configure(&mut group, d.universe);
        group.throughput(Throughput::Bytes(d.bytes.len() as u64));
        group.bench_function(d.name, |b| b.iter(|| serialize(black_box(&d.map)).unwrap()));
        group.finish();
    }
    for d in &sets {
        let mut group = c.benchmark_group(format!("bitmap_deserialize/{}", d.universe));
        configure(&mut group, d.universe);
        group.throughput(Throughput::Bytes(d.bytes.len() as u64));
        group.bench_function(d.name, |b| {
            b.iter(|| deserialize(black_box(&d.bytes)).unwrap())
        });
        group.finish();
    }
}

fn bench_dv_file(c: &mut Criterion) {
    let map = bernoulli(1_000_000, 2, SEED ^ 1_000_000u64.rotate_left(17));
    let mut writer = DvFileWriter::new(Vec::new()).unwrap();
    let slot = writer.append(&map).unwrap();
    let file = writer.finish().unwrap();
    assert_eq!(read_dv(&file, 0, &slot, "bench.bin").unwrap(), map);

    let mut group = c.benchmark_group("dv_file");
    configure(&mut group, "1M");
    group.throughput(Throughput::Bytes(u64::from(slot.size_in_bytes)));
    group.bench_function("read_dv/1M/dense", |b| {
        b.iter(|| read_dv(black_box(&file), 0, black_box(&slot), "bench.bin").unwrap())
    });
    group.finish();
}

fn bench_z85(c: &mut Criterion) {
    const LEN: usize = 2048;
    let mut rng = XorShift(SEED);
    let data: Vec<u8> = (0..LEN / 8)
        .flat_map(|_| rng.next().to_le_bytes())
        .collect();
    let text = z85::encode(&data);
    assert_eq!(z85::decode(&text, LEN).unwrap(), data);
    // For a multiple of 4 bytes the z85 crate's form is identical to Delta's.
    assert_eq!(::z85::encode(&data), text);

    let mut group = c.benchmark_group("z85");
    configure(&mut group, "1M");
    group.throughput(Throughput::Bytes(LEN as u64));
    group.bench_function("encode/2048B", |b| b.iter(|| z85::encode(black_box(&data))));
    group.bench_function("decode/2048B", |b| {
        b.iter(|| z85::decode(black_box(&text), LEN).unwrap())
    });
    group.bench_function("z85_crate_encode/2048B", |b| {
        b.iter(|| ::z85::encode(black_box(&data)))
    });
    group.bench_function("z85_crate_decode/2048B", |b| {
        b.iter(|| ::z85::decode(black_box(&text)).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench_bitmap, bench_dv_file, bench_z85);
criterion_main!(benches);
