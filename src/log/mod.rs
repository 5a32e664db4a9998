//! The Delta log: actions, which files make up a snapshot, and replay.
//! Pure logic: takes bytes and listings, returns values; no I/O.
pub mod actions;
/// Change Data Feed: the rows each commit changed.
pub mod cdf;
pub mod checkpoint;
pub mod features;
/// Duration table properties (`interval 1 week`).
pub mod interval;
/// CPU work over a checkpoint's rows on scoped threads (pure: no I/O, no runtime).
pub mod parallel;
/// Typed names of the files in `_delta_log` (commits, checkpoints, compactions, CRC, `_last_checkpoint`, sidecars), and [`path::normalize_path`] for the file paths actions record.
pub mod path;
pub mod replay;
pub mod schema;
pub mod segment;
/// Streaming source planning: offsets, admission, which commits a stream reads.
pub mod stream;
/// Change-feed streams (`readChangeFeed`): which change files a micro-batch reads.
pub mod stream_cdf;
