//! The process's tokio runtime, created lazily and re-created after a fork
//! (Spark's Python workers fork; a runtime's threads do not survive that).

use std::future::Future;
use std::sync::{Arc, Mutex};

use futures::stream::{BoxStream, Stream, StreamExt};

use crate::error::{Error, Result};

static RUNTIME: Mutex<Option<(u32, Arc<tokio::runtime::Runtime>)>> = Mutex::new(None);

/// The runtime for this process.
pub fn runtime() -> Result<Arc<tokio::runtime::Runtime>> {
    let pid = std::process::id();
    let mut guard = match RUNTIME.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some((owner, rt)) = guard.as_ref() {
        if *owner == pid {
            return Ok(rt.clone());
        }
        // Inherited from our parent through fork: its worker threads are gone.
        // Leak it rather than drop it (dropping would join threads that do not exist).
        if let Some((_, old)) = guard.take() {
            std::mem::forget(old);
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(
            std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .clamp(2, 8),
        )
        .thread_name("deltadv-io")
        .enable_all()
        .build()
        .map(Arc::new)
        .map_err(|source| Error::Io {
            path: "<tokio runtime>".to_string(),
            source,
        })?;
    *guard = Some((pid, rt.clone()));
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
