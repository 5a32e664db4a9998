//! The table layer: composes `io` (list, fetch) with `log` (segments, replay)
//! and `format` (DV bytes).
//!
//! | module | what |
//! |---|---|
//! | [`snapshot`] | a table at one version: protocol, metadata, live files, history, time travel |
//! | [`latest`] | freshness: the loaded snapshot, or a fresh one when the log moved on |
//! | [`dv`] | deletion vectors of live files: ranged and coalesced loads, writing DV files |

pub mod dv;
pub mod latest;
pub mod snapshot;
