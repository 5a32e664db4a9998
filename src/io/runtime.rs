//! The process's tokio runtime, created lazily and re-created after a fork
//! (Spark's Python workers fork; a runtime's threads do not survive that).

use std::future::Future;
use std::sync::{Arc, Mutex};

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
