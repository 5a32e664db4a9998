//! Storage access: the only module that knows object_store, tokio or the file
//! system.
pub mod parquet;
pub mod runtime;
pub mod store;

pub use object_store::path::Path as StorePath;
pub use runtime::{
    block_on, num_threads, set_num_threads, sleep, spawn_blocking, spawn_now, spawn_read_ahead,
    spawn_window,
};
pub use store::{Counts, TableStore};
