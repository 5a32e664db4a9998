//! The extension's allocator, jemalloc, and how deltadv's threads share it.
//!
//! jemalloc gives threads arenas of their own (up to four per CPU by
//! default): what a thread's arena freed stays resident for that arena's
//! next allocations (dirty pages, given back over seconds). A scan's
//! workers each decode pieces of files and free their buffers, so with an
//! arena per worker the peak RSS carries each worker's high-water mark:
//! benches/bench_stream_memory.py at 16 threads peaked at 615 MB with 64
//! arenas (the default of a 16-core machine; 616 MB there) and at 407-422
//! MB with 4 (the goal of issue 28: at most 512 MB).
//!
//! So the threads of deltadv's runtime share arenas of their own,
//! [`THREADS_PER_ARENA`] to one: the arenas, and what they keep, grow with
//! the threads a quarter as fast, and no arena is locked by more than that
//! many threads at once (jemalloc's per-thread caches serve small
//! allocations without its lock either way). Python's threads, and any
//! other, keep jemalloc's automatic arenas.

use std::ffi::c_uint;
use std::sync::Mutex;

/// The extension's allocator: jemalloc (see Cargo.toml), for the allocations
/// of this crate and its dependencies only; Python, numpy and pyarrow keep
/// theirs. Rust users of the crate (no `python` feature) choose their own.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Runtime threads to one arena.
const THREADS_PER_ARENA: usize = 4;

/// The arenas made for the runtime's threads (kept across a fork: the
/// child's jemalloc has the same arenas).
static ARENAS: Mutex<Vec<c_uint>> = Mutex::new(Vec::new());

/// The runtime's thread-start hook ([`crate::io::runtime::on_thread_start`]):
/// the `index`-th thread a runtime of `workers` workers starts (workers and
/// blocking threads alike) takes arena `index % arenas`, with
/// `ceil(workers / THREADS_PER_ARENA)` arenas. Where jemalloc refuses (it
/// cannot make an arena), the thread keeps its automatic one.
pub(crate) fn share_arenas(workers: usize, index: usize) {
    let Some(arena) = arena_for(workers, index) else {
        return;
    };
    // SAFETY: `thread.arena` is an `unsigned` (jemalloc's mallctl docs),
    // written as a c_uint; it only changes where this thread allocates.
    #[allow(unsafe_code)]
    let _ = unsafe { tikv_jemalloc_ctl::raw::write(b"thread.arena\0", arena) };
}

fn arena_for(workers: usize, index: usize) -> Option<c_uint> {
    let wanted = workers.div_ceil(THREADS_PER_ARENA).max(1);
    let mut arenas = match ARENAS.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    while arenas.len() < wanted {
        // SAFETY: reading `arenas.create` makes an arena and returns its
        // index, an `unsigned` (jemalloc's mallctl docs), read as a c_uint.
        #[allow(unsafe_code)]
        match unsafe { tikv_jemalloc_ctl::raw::read::<c_uint>(b"arenas.create\0") } {
            Ok(i) => arenas.push(i),
            Err(_) => break,
        }
    }
    let n = arenas.len().min(wanted);
    if n == 0 {
        return None;
    }
    arenas.get(index % n).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current() -> c_uint {
        #[allow(unsafe_code)]
        // SAFETY: as in `share_arenas`.
        unsafe { tikv_jemalloc_ctl::raw::read::<c_uint>(b"thread.arena\0") }.unwrap()
    }

    #[test]
    fn runtime_threads_share_arenas_four_to_one() {
        // threads of a 6-worker runtime: two arenas, taken in turn
        let seen: Vec<c_uint> = (0..8)
            .map(|i| {
                std::thread::spawn(move || {
                    share_arenas(6, i);
                    let _buffer = vec![0u8; 1 << 20]; // allocates in it
                    current()
                })
                .join()
                .unwrap()
            })
            .collect();
        let (a, b) = (seen[0], seen[1]);
        assert_ne!(a, b);
        assert_eq!(seen, [a, b, a, b, a, b, a, b]);
        // a thread that was not started by the runtime keeps its own
        let other = std::thread::spawn(current).join().unwrap();
        assert!(other != a && other != b, "{other} is one of the runtime's");
        // more workers: more arenas, the first ones kept
        assert_eq!(arena_for(9, 0), Some(a));
        assert_eq!(arena_for(9, 2), arena_for(9, 5));
        assert_eq!(ARENAS.lock().unwrap().len(), 3);
    }
}
