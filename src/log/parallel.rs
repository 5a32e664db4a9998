//! CPU work over the rows of a large checkpoint (live rows, stats, DV
//! descriptors), cut into contiguous ranges mapped on a persistent pool of
//! threads (rayon, `deltadv-cpu-<i>`). Pure: no I/O and no runtime, so log
//! code uses it; the caller says how many threads (the table layer passes
//! `io::num_threads()`).
//!
//! The pool outlives each call on purpose: a thread keeps its allocator arena
//! (glibc), so the memory one call frees is there for the next; threads made
//! per call (as `std::thread::scope` did) faulted their memory in again each
//! time (a 100,000-file `get_add_actions` at 2 threads: 4.5x the page faults
//! of one thread, and no faster).

use std::collections::HashMap;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};

/// Rows below which a range is not worth a thread of its own: handing one
/// over costs µs, about what a few thousand rows of stats take.
pub const MIN_ROWS_PER_THREAD: usize = 4_096;

/// The pool of `threads` threads for this process, built at the first call
/// with that count and kept (a count changes rarely: `set_num_threads`), and
/// built anew after a `fork` (the child has none of the parent's threads;
/// Spark's Python workers are forked).
fn pool(threads: usize) -> Result<Arc<rayon::ThreadPool>> {
    type Pools = Option<(u32, HashMap<usize, Arc<rayon::ThreadPool>>)>;
    static POOLS: Mutex<Pools> = Mutex::new(None);
    let mut guard = POOLS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let pid = std::process::id();
    if guard.as_ref().is_some_and(|(p, _)| *p != pid) {
        if let Some((_, stale)) = guard.take() {
            // Their threads are the parent's: dropping the pools would signal
            // threads that do not exist here.
            std::mem::forget(stale);
        }
    }
    let (_, pools) = guard.get_or_insert_with(|| (pid, HashMap::new()));
    if let Some(pool) = pools.get(&threads) {
        return Ok(pool.clone());
    }
    let built = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("deltadv-cpu-{i}"))
        .build()
        .map_err(|e| Error::Internal(format!("cannot start {threads} CPU threads: {e}")))?;
    let built = Arc::new(built);
    pools.insert(threads, built.clone());
    Ok(built)
}

/// `f` over `0..n` cut into at most `threads` contiguous ranges of at least
/// [`MIN_ROWS_PER_THREAD`] rows, each on a thread of the pool (the calling
/// thread waits); the results in range order, so the outcome does not depend
/// on the thread count. One range, on the calling thread, when `threads` is
/// 1 or `n` is small. A range that panics is an [`Error::Internal`].
pub fn map_ranges<T, F>(n: usize, threads: usize, f: F) -> Result<Vec<T>>
where
    T: Send,
    F: Fn(Range<usize>) -> T + Sync,
{
    let parts = threads.min(n / MIN_ROWS_PER_THREAD).max(1);
    if parts == 1 {
        return Ok(vec![f(0..n)]);
    }
    let size = n.div_ceil(parts);
    let range = |k: usize| (k * size).min(n)..((k + 1) * size).min(n);
    let mut slots: Vec<Option<std::thread::Result<T>>> = (0..parts).map(|_| None).collect();
    pool(threads)?.scope(|scope| {
        let f = &f;
        for (k, slot) in slots.iter_mut().enumerate() {
            scope.spawn(move |_| *slot = Some(catch_unwind(AssertUnwindSafe(|| f(range(k))))));
        }
    });
    slots
        .into_iter()
        .enumerate()
        .map(|(k, slot)| match slot {
            Some(Ok(out)) => Ok(out),
            _ => Err(Error::Internal(format!(
                "the thread working on rows {:?} of {n} panicked",
                range(k)
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_every_row_once_in_order() {
        for n in [0, 1, 4_095, 4_096, 8_192, 10_000, 100_003] {
            for threads in [1, 2, 3, 8, 64] {
                let parts = map_ranges(n, threads, |r| r).unwrap();
                let rows: Vec<usize> = parts.iter().flat_map(|r| r.clone()).collect();
                assert_eq!(rows, (0..n).collect::<Vec<_>>(), "n {n}, {threads} threads");
                let expected = threads.min(n / MIN_ROWS_PER_THREAD).max(1);
                assert_eq!(parts.len(), expected, "n {n}, {threads} threads");
            }
        }
    }

    #[test]
    fn ranges_run_at_once_on_the_pool_which_persists() {
        // Three ranges that each wait for the other two: they finish only if
        // all three run at the same time, on three pool threads.
        let barrier = std::sync::Barrier::new(3);
        let name = |_| {
            barrier.wait();
            let me = std::thread::current();
            (me.id(), me.name().map(str::to_string))
        };
        let first = map_ranges(3 * MIN_ROWS_PER_THREAD, 3, name).unwrap();
        let ids: std::collections::HashSet<_> = first.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids.len(), 3);
        assert!(!ids.contains(&std::thread::current().id()));
        assert!(first
            .iter()
            .all(|(_, n)| n.as_deref().is_some_and(|n| n.starts_with("deltadv-cpu-"))));
        // The same threads serve the next call.
        let again = map_ranges(3 * MIN_ROWS_PER_THREAD, 3, name).unwrap();
        assert!(again.iter().all(|(id, _)| ids.contains(id)));
    }

    #[test]
    fn a_panicking_range_is_an_error() {
        let r = map_ranges(2 * MIN_ROWS_PER_THREAD, 2, |r| {
            assert!(r.start == 0, "boom");
            r.len()
        });
        assert!(matches!(r, Err(Error::Internal(m)) if m.contains("panicked")));
    }
}
