//! The process's tokio runtime, created lazily and re-created after a fork
//! (Spark's Python workers fork; a runtime's threads do not survive that).
//!
//! ## Threads
//!
//! [`num_threads`] is how many threads deltadv works with: the runtime's
//! worker count, and how many row-group ranges a scan decodes at once. It is,
//! first found: the value given to [`set_num_threads`], the environment
//! variable [`NUM_THREADS_ENV`] (`DELTADV_NUM_THREADS`, a positive integer),
//! else the CPUs this process may use (`std::thread::available_parallelism`,
//! which respects CPU affinity and cgroup quotas; counted once per process),
//! never clamped.
//!
//! The runtime is sized once, when first used (and again after a fork).
//! Setting fewer threads afterwards takes effect at once for the work started
//! later (scans decode fewer ranges at once; the surplus workers idle);
//! setting more than the runtime has is refused with an error naming both
//! numbers (set it before the first table is opened, or set the variable).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::stream::{BoxStream, Stream, StreamExt};

use crate::error::{Error, Result};

/// The environment variable [`num_threads`] reads.
pub const NUM_THREADS_ENV: &str = "DELTADV_NUM_THREADS";

/// The process's runtime: (pid that built it, its worker count, it).
type Slot = Option<(u32, usize, Arc<tokio::runtime::Runtime>)>;

static RUNTIME: Mutex<Slot> = Mutex::new(None);

/// Threads set by [`set_num_threads`] (0: not set).
static NUM_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Called on every thread a runtime starts (see [`on_thread_start`]).
static THREAD_START: std::sync::OnceLock<fn(usize, usize)> = std::sync::OnceLock::new();

/// Have `hook(workers, index)` called on every thread the runtime starts,
/// workers and blocking threads alike: `workers` is the runtime's worker
/// count, `index` counts the threads it has started (from 0). One hook per
/// process (the Python extension sets its allocator's, see
/// `python::alloc`); false if one was set before. Runtimes built earlier
/// are not affected.
pub fn on_thread_start(hook: fn(usize, usize)) -> bool {
    THREAD_START.set(hook).is_ok()
}

fn lock_runtime() -> std::sync::MutexGuard<'static, Slot> {
    match RUNTIME.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// The threads deltadv works with (see the module docs): the value set by
/// [`set_num_threads`], else `DELTADV_NUM_THREADS`, else the CPUs this
/// process may use. At least 1.
pub fn num_threads() -> usize {
    match NUM_THREADS.load(Ordering::Relaxed) {
        0 => threads_from(std::env::var(NUM_THREADS_ENV).ok().as_deref(), cpus()),
        n => n,
    }
}

/// The CPUs this process may use, counted once: `available_parallelism`
/// reads the cgroup quota files at every call, and work asks often.
fn cpus() -> usize {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The environment variable's value if it is a positive integer, else `cpus`.
fn threads_from(env: Option<&str>, cpus: usize) -> usize {
    env.and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(cpus)
        .max(1)
}

/// Work with `n` threads from now on (see the module docs): an error when
/// `n` is 0, or when the runtime already runs with fewer workers than `n`.
pub fn set_num_threads(n: usize) -> Result<()> {
    if n == 0 {
        return Err(Error::InvalidArgument(
            "the number of threads must be at least 1, not 0".to_string(),
        ));
    }
    let guard = lock_runtime();
    if let Some((pid, workers, _)) = guard.as_ref() {
        if *pid == std::process::id() && *workers < n {
            return Err(Error::InvalidArgument(format!(
                "deltadv's runtime already runs {workers} worker threads (sized when first \
                 used), fewer than the {n} asked for: set the number of threads before the \
                 first table is opened, or set {NUM_THREADS_ENV}={n}"
            )));
        }
    }
    NUM_THREADS.store(n, Ordering::Relaxed);
    Ok(())
}

/// The worker threads of the runtime of this process, if it has been built.
pub fn runtime_workers() -> Option<usize> {
    let guard = lock_runtime();
    guard
        .as_ref()
        .filter(|(pid, _, _)| *pid == std::process::id())
        .map(|(_, workers, _)| *workers)
}

/// The runtime for this process.
pub fn runtime() -> Result<Arc<tokio::runtime::Runtime>> {
    let pid = std::process::id();
    let mut guard = lock_runtime();
    if let Some((owner, _, rt)) = guard.as_ref() {
        if *owner == pid {
            return Ok(rt.clone());
        }
        // Inherited from our parent through fork: its worker threads are gone.
        // Leak it rather than drop it (dropping would join threads that do not exist).
        if let Some((_, _, old)) = guard.take() {
            std::mem::forget(old);
        }
    }
    let workers = num_threads();
    let started = AtomicUsize::new(0);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("deltadv-io")
        .on_thread_start(move || {
            if let Some(hook) = THREAD_START.get() {
                hook(workers, started.fetch_add(1, Ordering::Relaxed));
            }
        })
        .enable_all()
        .build()
        .map(Arc::new)
        .map_err(|source| Error::Io {
            path: "<tokio runtime>".to_string(),
            source,
        })?;
    *guard = Some((pid, workers, rt.clone()));
    Ok(rt)
}

/// Run a future to completion on the process runtime (from a non-async thread).
///
/// It may also be called back from code the runtime is already driving: e.g.
/// Rust consuming a Python stream (an Arrow C stream) whose batches come from
/// a deltadv scan, which blocks on the runtime in turn. The thread then steps
/// out of the runtime (its other work handed to another worker) while it
/// blocks, instead of panicking.
pub fn block_on<F: Future>(future: F) -> Result<F::Output> {
    let rt = runtime()?;
    if tokio::runtime::Handle::try_current().is_ok() {
        return Ok(tokio::task::block_in_place(|| rt.block_on(future)));
    }
    Ok(rt.block_on(future))
}

/// Run CPU-heavy work (e.g. decoding a checkpoint) on the blocking pool, so
/// it overlaps with I/O running on the runtime's workers.
pub async fn spawn_blocking<F, T>(f: F) -> Result<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f).await.map_err(|e| Error::Io {
        path: "<blocking task>".to_string(),
        source: std::io::Error::other(e),
    })
}

/// Run a future as its own task on the runtime's workers (so several run in
/// parallel, not just concurrently on the caller's thread).
pub async fn spawn<F>(future: F) -> Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(future).await.map_err(|e| Error::Io {
        path: "<task>".to_string(),
        source: std::io::Error::other(e),
    })
}

/// Start `future` as its own task on the runtime's workers now (not when
/// the returned future is first polled, as [`spawn`] does): e.g. files whose
/// footers are fetched ahead in a `buffered` window. Must be called within
/// the runtime.
pub fn spawn_now<F>(future: F) -> impl Future<Output = Result<F::Output>> + Send + 'static
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handle = tokio::spawn(future);
    async move {
        handle.await.map_err(|e| Error::Io {
            path: "<task>".to_string(),
            source: std::io::Error::other(e),
        })
    }
}

/// Wait `duration` without holding a worker (e.g. a commit retry's backoff).
pub async fn sleep(duration: std::time::Duration) {
    tokio::time::sleep(duration).await;
}

/// `items`, produced by a task of their own on the runtime so the producer
/// runs ahead of the consumer, but at most `budget` units ahead: each item
/// weighs `weight(&item)` units (at least 1, at most `budget`) from when it
/// is produced until the consumer takes it. The producer stops after an item
/// for which `is_last` is true (e.g. an error), or when the consumer drops
/// the stream. If the task dies instead of ending (a panic), the stream ends
/// with `on_task_failure(why)`, so a failure never looks like a short stream.
///
/// Must be called within the runtime (from code it drives).
pub fn spawn_read_ahead<T, S, F>(
    items: S,
    budget: usize,
    weight: fn(&T) -> usize,
    is_last: fn(&T) -> bool,
    on_task_failure: F,
) -> BoxStream<'static, T>
where
    T: Send + 'static,
    S: Stream<Item = T> + Send + 'static,
    F: FnOnce(String) -> T + Send + 'static,
{
    let budget_units = budget.max(1);
    let semaphore = Arc::new(tokio::sync::Semaphore::new(budget_units));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<(T, tokio::sync::OwnedSemaphorePermit)>();
    let task = tokio::spawn(async move {
        let mut items = std::pin::pin!(items);
        while let Some(item) = items.next().await {
            let last = is_last(&item);
            let want = u32::try_from(weight(&item).clamp(1, budget_units)).unwrap_or(u32::MAX);
            // Waits while the consumer is `budget` behind; the semaphore is
            // never closed, so this fails only if it were.
            let Ok(permit) = semaphore.clone().acquire_many_owned(want).await else {
                return;
            };
            if tx.send((item, permit)).is_err() || last {
                return; // the consumer went away, or that was the last item
            }
        }
    });
    // When the channel closes, the task has ended: a task that died (a
    // panic) must not look like a stream that simply ended. The permit of an
    // item is given back when the consumer takes the item.
    futures::stream::unfold(Some((rx, task, on_task_failure)), |state| async move {
        let (mut rx, task, on_task_failure) = state?;
        match rx.recv().await {
            Some((item, _permit)) => Some((item, Some((rx, task, on_task_failure)))),
            None => match task.await {
                Ok(()) => None,
                Err(e) => Some((on_task_failure(e.to_string()), None)),
            },
        }
    })
    .boxed()
}

/// Streams started from `items`, at most `window` of them live at once: a
/// task of its own pulls the next item (awaiting it, e.g. a file's footer) as
/// soon as fewer than `window` started streams are live, and `start`s it (e.g.
/// spawns its read-ahead); a started stream stays live until it ends or is
/// dropped. The started streams come in `items`' order, however the consumer
/// interleaves them (`flatten`: in order; `flatten_unordered`: as ready).
/// The task stops when `items` ends or the consumer drops the stream; if it
/// dies instead (a panic), the stream ends with one stream of
/// `on_task_failure(why)`, so a failure never looks like a short stream.
///
/// Must be called within the runtime (from code it drives).
pub fn spawn_window<I, T, S, F, E>(
    items: S,
    window: usize,
    mut start: F,
    on_task_failure: E,
) -> BoxStream<'static, BoxStream<'static, T>>
where
    I: Send + 'static,
    T: Send + 'static,
    S: Stream<Item = I> + Send + 'static,
    F: FnMut(I) -> BoxStream<'static, T> + Send + 'static,
    E: FnOnce(String) -> T + Send + 'static,
{
    let semaphore = Arc::new(tokio::sync::Semaphore::new(window.max(1)));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<BoxStream<'static, T>>();
    let task = tokio::spawn(async move {
        let mut items = std::pin::pin!(items);
        loop {
            // The semaphore is never closed, so this fails only if it were.
            let Ok(permit) = semaphore.clone().acquire_owned().await else {
                return;
            };
            // A consumer that went away gives back the permits of the streams
            // it held: start nothing more for it (pull no item, start no read).
            if tx.is_closed() {
                return;
            }
            let Some(item) = items.next().await else {
                return;
            };
            if tx.is_closed() {
                return;
            }
            // The permit goes with the started stream, given back when the
            // consumer is done with it (drops it).
            let started = start(item)
                .map(move |x| {
                    let _live = &permit;
                    x
                })
                .boxed();
            if tx.send(started).is_err() {
                return; // the consumer went away
            }
        }
    });
    futures::stream::unfold(Some((rx, task, on_task_failure)), |state| async move {
        let (mut rx, task, on_task_failure) = state?;
        match rx.recv().await {
            Some(started) => Some((started, Some((rx, task, on_task_failure)))),
            None => match task.await {
                Ok(()) => None,
                Err(e) => {
                    let failed = futures::stream::once(futures::future::ready(on_task_failure(
                        e.to_string(),
                    )))
                    .boxed();
                    Some((failed, None))
                }
            },
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At most `window` started streams are live at once, counted from start
    /// until the consumer drops them; they come in order.
    #[test]
    fn spawn_window_keeps_at_most_window_streams_live() -> Result<()> {
        use std::sync::atomic::AtomicUsize;
        let started = Arc::new(AtomicUsize::new(0));
        let counter = started.clone();
        let got = block_on(async move {
            let mut streams = spawn_window(
                futures::stream::iter(0..10usize),
                3,
                move |i| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    futures::stream::iter([i * 10, i * 10 + 1]).boxed()
                },
                |_| usize::MAX,
            );
            let mut seen = Vec::new();
            let mut most = 0;
            let mut held = Vec::new();
            while let Some(s) = streams.next().await {
                held.push(s);
                sleep(std::time::Duration::from_millis(20)).await; // the task runs ahead
                most = most.max(started.load(Ordering::SeqCst) - seen.len() / 2);
                if held.len() == 3 {
                    // three live: nothing more starts until one is dropped
                    assert_eq!(started.load(Ordering::SeqCst), seen.len() / 2 + 3);
                    for s in held.drain(..) {
                        seen.extend(s.collect::<Vec<_>>().await);
                    }
                }
            }
            for s in held.drain(..) {
                seen.extend(s.collect::<Vec<_>>().await);
            }
            (seen, most)
        })?;
        let (seen, most) = got;
        let want: Vec<usize> = (0..10).flat_map(|i| [i * 10, i * 10 + 1]).collect();
        assert_eq!(seen, want);
        assert_eq!(most, 3);
        Ok(())
    }

    #[test]
    fn threads_from_the_environment_or_the_cpus() {
        assert_eq!(threads_from(None, 16), 16);
        assert_eq!(threads_from(Some("3"), 16), 3);
        assert_eq!(threads_from(Some(" 24 "), 16), 24);
        // not a positive integer: the CPUs
        assert_eq!(threads_from(Some("0"), 16), 16);
        assert_eq!(threads_from(Some("many"), 16), 16);
        assert_eq!(threads_from(Some("-2"), 2), 2);
        assert_eq!(threads_from(None, 0), 1);
    }

    #[test]
    fn set_num_threads_refuses_zero_and_more_than_the_runtime_has() -> Result<()> {
        let e = set_num_threads(0).unwrap_err().to_string();
        assert!(e.contains("at least 1"), "{e}");
        let workers = runtime()?.metrics().num_workers();
        assert_eq!(runtime_workers(), Some(workers));
        let before = num_threads();
        let e = set_num_threads(workers + 1).unwrap_err().to_string();
        assert!(
            e.contains(&format!("{workers} worker threads")) && e.contains(NUM_THREADS_ENV),
            "{e}"
        );
        assert_eq!(num_threads(), before, "a refused setting changes nothing");
        // fewer (or as many): taken at once
        set_num_threads(1)?;
        assert_eq!(num_threads(), 1);
        set_num_threads(workers)?;
        assert_eq!(num_threads(), workers);
        Ok(())
    }
}
