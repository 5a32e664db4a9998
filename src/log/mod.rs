//! The Delta log: actions, which files make up a snapshot, and replay.
//! Pure logic: takes bytes and listings, returns values; no I/O.
pub mod actions;
pub mod checkpoint;
pub mod features;
pub mod replay;
pub mod schema;
pub mod segment;
