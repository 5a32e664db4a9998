//! Decoding checkpoint files handed over as bytes: classic single- and
//! multi-part parquet, V2 top-level files (parquet or JSON) and their parquet
//! sidecars. The table layer fetches the files; this module only decodes them,
//! so it runs on a blocking thread or in a test without any store.
//!
//! ```text
//! classic:  <v>.checkpoint.parquet            ─┐
//! multi:    <v>.checkpoint.<i>.<n>.parquet    ─┼─> decode() ─> CheckpointData
//! V2:       <v>.checkpoint.<uuid>.{json,parquet}┘        │
//!              └─ sidecar actions ─> sidecar_location() ─> fetched by the
//!                 table layer ─> decode() ─> absorbed into the same data
//! ```

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{DataType, FieldRef, Fields, Schema};
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};
use parquet::arrow::ProjectionMask;
use parquet::file::reader::{ChunkReader, Length};

use super::{split_batch, AddColumns};
use crate::error::{Error, Result};
use crate::log::actions::{self, Action};
use crate::log::parallel::{map_ranges, MIN_ROWS_PER_THREAD};
use crate::log::path::normalize_path;
use crate::log::path::{LogPath, LOG_DIR, SIDECAR_DIR};
use crate::log::segment::LastCheckpoint;

/// Rows per decoded checkpoint batch.
const CHECKPOINT_BATCH_ROWS: usize = 65_536;

/// Top-level checkpoint columns replay needs.
const CHECKPOINT_COLUMNS: &[&str] = &[
    "add",
    "remove",
    "metaData",
    "protocol",
    "txn",
    "domainMetadata",
    "checkpointMetadata",
    "sidecar",
];

fn parquet_error(file: &str, e: impl std::fmt::Display) -> Error {
    Error::Parquet {
        file: file.to_string(),
        detail: e.to_string(),
    }
}

/// Which checkpoint leaf columns replay needs: the action columns, without
/// `*_parsed` (except `add.stats_parsed.numRecords` / `.tightBounds`).
fn wanted_leaf(parts: &[String]) -> bool {
    let top = parts.first().map(String::as_str).unwrap_or("");
    let second = parts.get(1).map(String::as_str).unwrap_or("");
    let third = parts.get(2).map(String::as_str).unwrap_or("");
    CHECKPOINT_COLUMNS.contains(&top)
        && (!second.ends_with("_parsed")
            || (top == "add"
                && second == "stats_parsed"
                && parts.len() == 3
                && matches!(third, "numRecords" | "tightBounds")))
}

/// A checkpoint file held as consecutive pieces (fetched as ranges at once
/// by the table layer), read by parquet without joining them: a read within
/// one piece is a slice of it; only a page that straddles two pieces is
/// copied.
///
/// ```text
/// file:    [ piece 0 | piece 1 | ... | piece n-1 ]
/// starts:    0         len0      ...
/// ```
#[derive(Debug, Clone)]
pub struct Pieces(Arc<PiecesInner>);

#[derive(Debug)]
struct PiecesInner {
    /// Offset of each piece in the file (ascending, the first 0).
    starts: Vec<u64>,
    pieces: Vec<Bytes>,
    len: u64,
}

impl Pieces {
    /// The file made of `pieces`, in order.
    pub fn new(pieces: Vec<Bytes>) -> Pieces {
        let mut starts = Vec::with_capacity(pieces.len());
        let mut len = 0u64;
        for p in &pieces {
            starts.push(len);
            len += p.len() as u64;
        }
        Pieces(Arc::new(PiecesInner {
            starts,
            pieces,
            len,
        }))
    }

    /// The piece holding byte `pos` and the offset of `pos` in it.
    fn at(&self, pos: u64) -> Option<(&Bytes, usize)> {
        let k = self
            .0
            .starts
            .partition_point(|&s| s <= pos)
            .checked_sub(1)?;
        let piece = self.0.pieces.get(k)?;
        let off = usize::try_from(pos - self.0.starts.get(k)?).ok()?;
        (off < piece.len()).then_some((piece, off))
    }
}

impl Length for Pieces {
    fn len(&self) -> u64 {
        self.0.len
    }
}

/// A reader of [`Pieces`] from an offset on.
pub struct PiecesReader {
    pieces: Pieces,
    pos: u64,
}

impl std::io::Read for PiecesReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Some((piece, off)) = self.pieces.at(self.pos) else {
            return Ok(0); // at or past the end
        };
        let rest = piece.get(off..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        if let (Some(to), Some(from)) = (buf.get_mut(..n), rest.get(..n)) {
            to.copy_from_slice(from);
        }
        self.pos += n as u64;
        Ok(n)
    }
}

impl ChunkReader for Pieces {
    type T = PiecesReader;

    fn get_read(&self, start: u64) -> parquet::errors::Result<PiecesReader> {
        if start > self.0.len {
            return Err(parquet::errors::ParquetError::EOF(format!(
                "expected to read at offset {start}, while the file has length {}",
                self.0.len
            )));
        }
        Ok(PiecesReader {
            pieces: self.clone(),
            pos: start,
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let eof = || {
            parquet::errors::ParquetError::EOF(format!(
                "expected to read {length} bytes at offset {start}, while the file has length {}",
                self.0.len
            ))
        };
        if start
            .checked_add(length as u64)
            .is_none_or(|end| end > self.0.len)
        {
            return Err(eof());
        }
        if length == 0 {
            return Ok(Bytes::new());
        }
        let (piece, off) = self.at(start).ok_or_else(eof)?;
        if let Some(within) = off.checked_add(length).filter(|&end| end <= piece.len()) {
            return Ok(piece.slice(off..within));
        }
        let mut out = Vec::with_capacity(length);
        std::io::Read::read_to_end(
            &mut std::io::Read::take(self.get_read(start)?, length as u64),
            &mut out,
        )
        .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))?;
        if out.len() != length {
            return Err(eof());
        }
        Ok(Bytes::from(out))
    }
}

/// `meta` with the string fields of `add` (and of its `deletionVector`)
/// read as `Utf8View`: a plain page's views point into the page itself, so
/// the paths and stats of an uncompressed checkpoint are not copied (nor
/// their memory allocated) again; maps and other actions keep their types.
fn adds_as_views(meta: ArrowReaderMetadata) -> parquet::errors::Result<ArrowReaderMetadata> {
    fn views(fields: &Fields, depth: usize) -> Fields {
        fields
            .iter()
            .map(|f| {
                let t = match f.data_type() {
                    DataType::Utf8 => DataType::Utf8View,
                    DataType::Struct(children) if depth == 0 => {
                        DataType::Struct(views(children, depth + 1))
                    }
                    other => other.clone(),
                };
                Arc::new(f.as_ref().clone().with_data_type(t))
            })
            .collect()
    }
    let schema = meta.schema();
    let Some((index, add)) = schema.fields().find("add") else {
        return Ok(meta);
    };
    let DataType::Struct(children) = add.data_type() else {
        return Ok(meta);
    };
    let mut fields: Vec<FieldRef> = schema.fields().iter().cloned().collect();
    if let Some(slot) = fields.get_mut(index) {
        *slot = Arc::new(
            add.as_ref()
                .clone()
                .with_data_type(DataType::Struct(views(children, 0))),
        );
    }
    let hinted = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    ArrowReaderMetadata::try_new(
        meta.metadata().clone(),
        ArrowReaderOptions::new().with_schema(hinted),
    )
}

/// The checkpoint's footer, with `add`'s strings hinted as views
/// ([`adds_as_views`]): loaded once per file, shared by its ranges.
fn load_footer<R: ChunkReader>(reader: &R, file: &str) -> Result<ArrowReaderMetadata> {
    ArrowReaderMetadata::load(reader, ArrowReaderOptions::new())
        .and_then(adds_as_views)
        .map_err(|e| parquet_error(file, e))
}

/// Decode the rows `rows` (all when `None`) of the checkpoint's leaves in
/// `leaves` into record batches; `meta` is the file's [`load_footer`].
fn read_leaves<R: ChunkReader + 'static>(
    reader: R,
    meta: ArrowReaderMetadata,
    leaves: &[usize],
    rows: Option<std::ops::Range<usize>>,
    file: &str,
) -> Result<Vec<RecordBatch>> {
    let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(reader, meta);
    let mask = ProjectionMask::leaves(builder.parquet_schema(), leaves.iter().copied());
    let mut builder = builder
        .with_projection(mask)
        .with_batch_size(CHECKPOINT_BATCH_ROWS);
    if let Some(rows) = rows {
        builder = builder.with_row_selection(RowSelection::from(vec![
            RowSelector::skip(rows.start),
            RowSelector::select(rows.len()),
        ]));
    }
    builder
        .build()
        .map_err(|e| parquet_error(file, e))?
        .map(|b| b.map_err(|e| parquet_error(file, e)))
        .collect()
}

/// Decode checkpoint parquet (a classic part, a V2 top-level file or a
/// sidecar) on the calling thread: `add` rows stay columnar, other actions
/// are parsed. `file` names the file in errors.
pub fn decode_parquet(bytes: Bytes, file: &str) -> Result<(Vec<AddColumns>, Vec<Action>)> {
    decode_parquet_on(bytes, file, 1)
}

/// [`decode_parquet`] on up to `threads` threads: ranges of rows (at least
/// [`MIN_ROWS_PER_THREAD`] each) decoded and split into adds and other
/// actions at once, each thread skipping the pages before its range; the
/// result in row order, the same for any number of threads.
pub fn decode_parquet_on(
    bytes: Bytes,
    file: &str,
    threads: usize,
) -> Result<(Vec<AddColumns>, Vec<Action>)> {
    decode_reader(bytes, file, threads)
}

/// [`decode_parquet_on`] of a file fetched as consecutive `pieces` (ranges
/// fetched at once), decoded without joining them.
pub fn decode_pieces(
    pieces: Vec<Bytes>,
    file: &str,
    threads: usize,
) -> Result<(Vec<AddColumns>, Vec<Action>)> {
    decode_reader(Pieces::new(pieces), file, threads)
}

fn decode_reader<R: ChunkReader + Clone + 'static>(
    bytes: R,
    file: &str,
    threads: usize,
) -> Result<(Vec<AddColumns>, Vec<Action>)> {
    let meta = load_footer(&bytes, file)?;
    let leaves: Vec<usize> = meta
        .parquet_schema()
        .columns()
        .iter()
        .enumerate()
        .filter(|(_, c)| wanted_leaf(c.path().parts()))
        .map(|(i, _)| i)
        .collect();
    let num_rows = meta.metadata().file_metadata().num_rows();
    let rows = usize::try_from(num_rows)
        .map_err(|_| parquet_error(file, format!("the footer says {num_rows} rows")))?;
    let whole = threads.min(rows / MIN_ROWS_PER_THREAD) <= 1;
    let parts = map_ranges(rows, threads, |range| {
        let batches = read_leaves(
            bytes.clone(),
            meta.clone(),
            &leaves,
            (!whole).then_some(range),
            file,
        )?;
        let mut adds = Vec::new();
        let mut others = Vec::new();
        for batch in &batches {
            let split = split_batch(batch, file)?;
            adds.extend(split.adds);
            others.extend(split.others);
        }
        Ok::<_, Error>((adds, others))
    })?;
    let mut adds = Vec::new();
    let mut others = Vec::new();
    for part in parts {
        let (a, o) = part?;
        adds.extend(a);
        others.extend(o);
    }
    Ok((adds, others))
}

/// Decode one checkpoint file: a JSON V2 top-level checkpoint (`json`) goes
/// through the commit-line parser, anything else is parquet, decoded on up
/// to `threads` threads ([`decode_parquet_on`]).
pub fn decode(
    bytes: Bytes,
    file: &str,
    json: bool,
    threads: usize,
) -> Result<(Vec<AddColumns>, Vec<Action>)> {
    if json {
        Ok((Vec::new(), actions::parse_commit(&bytes, file)?))
    } else {
        decode_parquet_on(bytes, file, threads)
    }
}

/// Where a `sidecar` action's file lives, relative to the table root: a bare
/// file name is under `_delta_log/_sidecars/`; a path with a `/` (relative to
/// the table root) or a URI is kept as written (URL-decoded).
pub fn sidecar_location(path: &str) -> Result<String> {
    let rel = normalize_path(path);
    if rel.contains('/') || rel.contains(':') {
        return Ok(rel);
    }
    LogPath::sidecar(&rel)
        .map(|p| p.relative_path())
        .ok_or_else(|| Error::CorruptLog {
            file: format!("{LOG_DIR}/{SIDECAR_DIR}"),
            detail: format!("a checkpoint names the sidecar {rel:?}, which is not a file name"),
        })
}

/// A checkpoint, decoded: its live-candidate `add` rows (columnar), its other
/// actions, and how many actions it holds in all.
#[derive(Debug, Default)]
pub struct CheckpointData {
    pub adds: Vec<AddColumns>,
    pub others: Vec<Action>,
    pub count: u64,
}

impl CheckpointData {
    /// Add the decoded contents of one checkpoint file (part, top-level file
    /// or sidecar).
    pub fn absorb(&mut self, adds: Vec<AddColumns>, others: Vec<Action>) {
        self.count += others.len() as u64 + adds.iter().map(|a| a.num_adds() as u64).sum::<u64>();
        self.adds.extend(adds);
        self.others.extend(others);
    }

    /// The sidecar files named so far (as written in their actions).
    pub fn sidecars(&self) -> Vec<String> {
        self.others
            .iter()
            .filter_map(|a| match a {
                Action::Sidecar(s) => Some(s.path.clone()),
                _ => None,
            })
            .collect()
    }

    /// Check the action count against `_last_checkpoint`'s `size` when the
    /// hint describes this checkpoint (`version`); `file` names the checkpoint.
    pub fn check_hint(&self, hint: &LastCheckpoint, version: u64, file: &str) -> Result<()> {
        match hint.size {
            Some(size) if hint.version == version && size != self.count => Err(Error::CorruptLog {
                file: file.to_string(),
                detail: format!(
                    "_last_checkpoint says the checkpoint holds {size} actions, it holds {}",
                    self.count
                ),
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]
mod tests {
    use std::sync::Arc;

    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    use arrow_schema::{DataType, Field, Fields, Schema};
    use parquet::arrow::ArrowWriter;

    use super::*;

    /// Checkpoint parquet bytes holding `lines` (JSON actions) in `schema`.
    fn parquet_with(schema: Arc<Schema>, lines: &[&str]) -> Bytes {
        let mut decoder = arrow_json::ReaderBuilder::new(schema.clone())
            .with_batch_size(lines.len().max(1))
            .build_decoder()
            .unwrap();
        decoder.decode(lines.join("\n").as_bytes()).unwrap();
        let batch = decoder.flush().unwrap().unwrap();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, schema, None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        Bytes::from(out)
    }

    fn classic(lines: &[&str]) -> Bytes {
        parquet_with(crate::write::checkpoint::checkpoint_schema(), lines)
    }

    const PROTOCOL: &str = r#"{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}"#;
    const ADD_A: &str = r#"{"add":{"path":"a%20b.parquet","size":10,"modificationTime":5,"dataChange":false,"stats":"{\"numRecords\":7}"}}"#;
    const ADD_B: &str =
        r#"{"add":{"path":"b.parquet","size":20,"modificationTime":6,"dataChange":false}}"#;
    const REMOVE: &str =
        r#"{"remove":{"path":"c.parquet","deletionTimestamp":9,"dataChange":false}}"#;

    #[test]
    fn classic_parts_decode_and_count() {
        // One pass on the calling thread, or add.stats on a second: the same.
        for threads in [1, 2] {
            classic_parts_at(threads);
        }
    }

    fn classic_parts_at(threads: usize) {
        let part1 = classic(&[PROTOCOL, ADD_A]);
        let part2 = classic(&[ADD_B, REMOVE]);
        let mut data = CheckpointData::default();
        for (i, bytes) in [part1, part2].into_iter().enumerate() {
            let (adds, others) = decode(bytes, &format!("part{i}"), false, threads).unwrap();
            data.absorb(adds, others);
        }
        assert_eq!(data.count, 4);
        let adds: Vec<(String, i64, Option<i64>)> = data
            .adds
            .iter()
            .flat_map(|a| {
                (0..a.len())
                    .filter(|&i| a.is_add(i))
                    .map(|i| {
                        (
                            a.raw_path(i).to_string(),
                            a.size(i),
                            a.record_count(i).unwrap().0,
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(
            adds,
            [
                ("a%20b.parquet".to_string(), 10, Some(7)),
                ("b.parquet".to_string(), 20, None)
            ]
        );
        assert!(matches!(data.others[0], Action::Protocol(_)));
        match &data.others[1] {
            Action::Remove(r) => assert_eq!(
                (r.path.as_str(), r.deletion_timestamp),
                ("c.parquet", Some(9))
            ),
            other => panic!("{other:?}"),
        }
        assert!(data.sidecars().is_empty());
    }

    #[test]
    fn ranges_of_rows_decode_as_one_pass() {
        // 13,001 rows: adds (some with stats, some with a DV), removes, a
        // protocol; decoded in 2 and 3 ranges of rows on as many threads, as
        // in one pass.
        let mut lines: Vec<String> = vec![PROTOCOL.to_string()];
        for k in 0..13_000 {
            lines.push(match k % 5 {
                0 => format!(
                    r#"{{"remove":{{"path":"r{k}.parquet","deletionTimestamp":{k},"dataChange":false}}}}"#
                ),
                1 => format!(
                    r#"{{"add":{{"path":"a{k}.parquet","size":{k},"modificationTime":5,"dataChange":false,"deletionVector":{{"storageType":"i","pathOrInlineDv":"wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{{L","sizeInBytes":40,"cardinality":6}}}}}}"#
                ),
                _ => format!(
                    r#"{{"add":{{"path":"a{k}.parquet","size":{k},"modificationTime":5,"dataChange":false,"stats":"{{\"numRecords\":{k}}}"}}}}"#
                ),
            });
        }
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let bytes = classic(&lines);
        type Row = (String, i64, Option<i64>, Option<String>);
        let summary = |(adds, others): (Vec<AddColumns>, Vec<Action>)| -> (Vec<Row>, Vec<String>) {
            let rows = adds
                .iter()
                .flat_map(|a| {
                    (0..a.len())
                        .filter(|&i| a.is_add(i))
                        .map(|i| {
                            (
                                a.raw_path(i).to_string(),
                                a.size(i),
                                a.record_count(i).unwrap().0,
                                a.dv_unique_id(i),
                            )
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            (rows, others.iter().map(|o| format!("{o:?}")).collect())
        };
        let decoded =
            |threads: usize| summary(decode_parquet_on(bytes.clone(), "big", threads).unwrap());
        let one = decoded(1);
        assert_eq!(one.0.len(), 10_400);
        assert_eq!(one.1.len(), 2_601);
        assert_eq!(one.0[1], ("a2.parquet".to_string(), 2, Some(2), None));
        assert!(one.0[0].3.is_some(), "a1 has its DV");
        for threads in [2, 3] {
            assert_eq!(decoded(threads), one, "{threads} threads");
        }
        // The same file fetched as pieces (ranges), cut anywhere, pages
        // straddling the cuts: decoded as the whole.
        let n = bytes.len();
        for cuts in [vec![n / 2], vec![1, n / 3, n / 3 + 1, n - 8], vec![n - 1]] {
            let mut pieces = Vec::new();
            let mut from = 0;
            for c in cuts.iter().copied().chain([n]) {
                pieces.push(bytes.slice(from..c));
                from = c;
            }
            for threads in [1, 3] {
                let got = summary(decode_pieces(pieces.clone(), "big", threads).unwrap());
                assert!(got == one, "cuts {cuts:?}, {threads} threads");
            }
        }
    }

    #[test]
    fn pieces_read_across_their_cuts_and_stop_at_the_end() {
        use std::io::Read;
        let whole = Bytes::from_static(b"0123456789");
        let pieces = Pieces::new(vec![
            whole.slice(0..3),
            whole.slice(3..4),
            whole.slice(4..10),
        ]);
        assert_eq!(pieces.len(), 10);
        for start in 0..=10u64 {
            for len in 0..=(10 - start as usize) {
                let got = pieces.get_bytes(start, len).unwrap();
                assert_eq!(got, whole.slice(start as usize..start as usize + len));
            }
            let mut rest = Vec::new();
            pieces
                .get_read(start)
                .unwrap()
                .read_to_end(&mut rest)
                .unwrap();
            assert_eq!(rest, &whole[start as usize..]);
        }
        assert!(pieces.get_bytes(8, 3).is_err());
        assert!(pieces.get_bytes(u64::MAX, 2).is_err());
        assert!(pieces.get_read(11).is_err());
        let empty = Pieces::new(Vec::new());
        assert_eq!(empty.len(), 0);
        assert_eq!(empty.get_bytes(0, 0).unwrap(), Bytes::new());
    }

    #[test]
    fn v2_json_top_level_with_sidecars() {
        let top = [
            PROTOCOL,
            r#"{"checkpointMetadata":{"version":3}}"#,
            r#"{"sidecar":{"path":"016ae953-37a9-438e-8683-9a9a4a79a395.parquet","sizeInBytes":1,"modificationTime":1}}"#,
            r#"{"sidecar":{"path":"_delta_log/_sidecars/other%20one.parquet","sizeInBytes":1,"modificationTime":1}}"#,
        ]
        .join("\n");
        let mut data = CheckpointData::default();
        let (adds, others) = decode(Bytes::from(top), "top.json", true, 2).unwrap();
        assert!(adds.is_empty());
        data.absorb(adds, others);
        let located: Vec<String> = data
            .sidecars()
            .iter()
            .map(|p| sidecar_location(p).unwrap())
            .collect();
        assert_eq!(
            located,
            [
                "_delta_log/_sidecars/016ae953-37a9-438e-8683-9a9a4a79a395.parquet",
                "_delta_log/_sidecars/other one.parquet"
            ]
        );
        // A sidecar holds only add/remove rows.
        let sidecar_schema = Arc::new(Schema::new(
            crate::write::checkpoint::checkpoint_schema()
                .fields()
                .iter()
                .filter(|f| matches!(f.name().as_str(), "add" | "remove"))
                .cloned()
                .collect::<Vec<_>>(),
        ));
        let (adds, others) = decode(
            parquet_with(sidecar_schema, &[ADD_A, REMOVE, ADD_B]),
            "side",
            false,
            1,
        )
        .unwrap();
        data.absorb(adds, others);
        // protocol, checkpointMetadata, 2 sidecars, 2 adds, 1 remove
        assert_eq!(data.count, 7);
        assert_eq!(data.adds.iter().map(AddColumns::num_adds).sum::<usize>(), 2);
    }

    #[test]
    fn sidecar_locations() {
        assert_eq!(
            sidecar_location("s3://bucket/t/_delta_log/_sidecars/x.parquet").unwrap(),
            "s3://bucket/t/_delta_log/_sidecars/x.parquet"
        );
        assert_eq!(
            sidecar_location("sub/x%25y.parquet").unwrap(),
            "sub/x%y.parquet"
        );
        for bad in ["", "..", "."] {
            match sidecar_location(bad) {
                Err(Error::CorruptLog { file, detail }) => {
                    assert_eq!(file, "_delta_log/_sidecars");
                    assert!(detail.contains("which is not a file name"), "{detail}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn stats_parsed_without_stats_json() {
        // Delta Spark may write only `stats_parsed` (checkpoint.writeStatsAsJson=false).
        let parsed = Field::new(
            "stats_parsed",
            DataType::Struct(Fields::from(vec![
                Field::new("numRecords", DataType::Int64, true),
                Field::new("tightBounds", DataType::Boolean, true),
                Field::new(
                    "minValues",
                    DataType::Struct(Fields::from(vec![Field::new("id", DataType::Int64, true)])),
                    true,
                ),
            ])),
            true,
        );
        let add = DataType::Struct(Fields::from(vec![
            Field::new("path", DataType::Utf8, true),
            Field::new("size", DataType::Int64, true),
            parsed,
        ]));
        let schema = Arc::new(Schema::new(vec![Field::new("add", add, true)]));
        let bytes = parquet_with(
            schema,
            &[
                r#"{"add":{"path":"p","size":1,"stats_parsed":{"numRecords":12,"tightBounds":false,"minValues":{"id":3}}}}"#,
            ],
        );
        let (adds, others) = decode_parquet(bytes, "sp").unwrap();
        assert!(others.is_empty());
        assert_eq!(adds[0].record_count(0).unwrap(), (Some(12), Some(false)));
    }

    #[test]
    fn hint_size_is_checked_only_for_its_version() {
        let mut data = CheckpointData::default();
        let (adds, others) = decode(classic(&[PROTOCOL, ADD_A]), "c", false, 1).unwrap();
        data.absorb(adds, others);
        let hint = |version, size| LastCheckpoint {
            version,
            size,
            parts: None,
        };
        assert!(data.check_hint(&hint(5, Some(2)), 5, "c").is_ok());
        assert!(data.check_hint(&hint(5, None), 5, "c").is_ok());
        assert!(data.check_hint(&hint(4, Some(9)), 5, "c").is_ok());
        match data.check_hint(&hint(5, Some(3)), 5, "_delta_log/5.checkpoint.parquet") {
            Err(Error::CorruptLog { file, detail }) => {
                assert_eq!(file, "_delta_log/5.checkpoint.parquet");
                assert_eq!(
                    detail,
                    "_last_checkpoint says the checkpoint holds 3 actions, it holds 2"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn garbage_and_truncated_bytes_are_parquet_errors_naming_the_file() {
        let whole = classic(&[PROTOCOL, ADD_A]);
        for bytes in [
            Bytes::from_static(b"not parquet at all"),
            whole.slice(..whole.len() - 9),
            Bytes::new(),
        ] {
            match decode_parquet(bytes, "_delta_log/7.checkpoint.parquet") {
                Err(Error::Parquet { file, .. }) => {
                    assert_eq!(file, "_delta_log/7.checkpoint.parquet")
                }
                other => panic!("{other:?}"),
            }
        }
        match decode(Bytes::from_static(b"{not json"), "top.json", true, 2) {
            Err(e) => assert!(e.to_string().contains("top.json"), "{e}"),
            Ok(_) => panic!("garbage JSON decoded"),
        }
    }
    #[test]
    fn add_strings_are_views_into_uncompressed_pages() {
        // A plain, uncompressed checkpoint: add.path and add.stats decode as
        // views whose data is the fetched bytes themselves (no copy); the
        // partitionValues map and other actions keep their string type.
        let schema = crate::write::checkpoint::checkpoint_schema();
        let mut decoder = arrow_json::ReaderBuilder::new(schema.clone())
            .build_decoder()
            .unwrap();
        let lines = [PROTOCOL, ADD_A, ADD_B, REMOVE];
        decoder.decode(lines.join("\n").as_bytes()).unwrap();
        let batch = decoder.flush().unwrap().unwrap();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_dictionary_enabled(false)
            .build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, schema, Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let bytes = Bytes::from(out);
        let meta = load_footer(&bytes, "f").unwrap();
        let leaves: Vec<usize> = (0..meta.parquet_schema().num_columns()).collect();
        let batches = read_leaves(bytes.clone(), meta, &leaves, None, "f").unwrap();
        let add = batches[0]
            .column_by_name("add")
            .unwrap()
            .as_struct()
            .clone();
        let within = |p: *const u8| {
            let start = bytes.as_ptr() as usize;
            (start..start + bytes.len()).contains(&(p as usize))
        };
        for name in ["path", "stats"] {
            let column = add.column_by_name(name).unwrap();
            assert_eq!(column.data_type(), &DataType::Utf8View, "{name}");
            let views = column.as_string_view();
            assert!(!views.data_buffers().is_empty(), "{name}");
            assert!(
                views.data_buffers().iter().all(|b| within(b.as_ptr())),
                "{name}"
            );
        }
        let pv = add.column_by_name("partitionValues").unwrap();
        let DataType::Map(entries, _) = pv.data_type() else {
            panic!("{pv:?}")
        };
        assert!(
            format!("{entries:?}").contains("Utf8") && !format!("{entries:?}").contains("Utf8View")
        );
        let remove = batches[0]
            .column_by_name("remove")
            .unwrap()
            .as_struct()
            .clone();
        assert_eq!(
            remove.column_by_name("path").unwrap().data_type(),
            &DataType::Utf8
        );
        // And the adds decode as before.
        let (adds, others) = decode_parquet(bytes, "f").unwrap();
        let paths: Vec<&str> = adds
            .iter()
            .flat_map(|a| (0..a.len()).filter(|&i| a.is_add(i)).map(|i| a.raw_path(i)))
            .collect();
        assert_eq!(paths, ["a%20b.parquet", "b.parquet"]);
        assert_eq!(adds[0].record_count(1).unwrap().0, Some(7));
        assert_eq!(others.len(), 2);
    }
}
