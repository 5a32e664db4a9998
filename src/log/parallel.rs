//! CPU work over the rows of a large checkpoint (live rows, stats, DV
//! descriptors), cut into contiguous ranges mapped on scoped threads
//! (`std::thread::scope`). Pure: no I/O and no runtime, so log code uses it;
//! the caller says how many threads (the table layer passes
//! `io::num_threads()`).

use std::ops::Range;

use crate::error::{Error, Result};

/// Rows below which a range is not worth a thread of its own: starting one
/// costs tens of µs, about what a few thousand rows of stats take.
pub const MIN_ROWS_PER_THREAD: usize = 4_096;

/// `f` over `0..n` cut into at most `threads` contiguous ranges of at least
/// [`MIN_ROWS_PER_THREAD`] rows, each on a thread of its own (the first on
/// the calling thread); the results in range order, so the outcome does not
/// depend on the thread count. One range, on the calling thread, when
/// `threads` is 1 or `n` is small.
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
    std::thread::scope(|scope| {
        let f = &f;
        let others: Vec<_> = (1..parts)
            .map(|k| scope.spawn(move || f(range(k))))
            .collect();
        let mut out = Vec::with_capacity(parts);
        out.push(f(range(0)));
        for (k, handle) in others.into_iter().enumerate() {
            out.push(handle.join().map_err(|_| {
                Error::Internal(format!(
                    "the thread working on rows {:?} of {n} panicked",
                    range(k + 1)
                ))
            })?);
        }
        Ok(out)
    })
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
    fn ranges_run_on_other_threads() {
        let me = std::thread::current().id();
        let ids = map_ranges(3 * MIN_ROWS_PER_THREAD, 3, |_| std::thread::current().id()).unwrap();
        assert_eq!(ids[0], me);
        assert!(ids[1] != me && ids[2] != me && ids[1] != ids[2]);
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
