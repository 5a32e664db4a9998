//! Storage access. The only module that touches the file system (and, later,
//! object stores).
pub mod local;
