//! Integration tests, one binary with a module per topic.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod cdf;
mod checkpoint_roundtrip;
mod common;
mod corrupt;
mod dv_loading;
mod fixture;
mod golden_dvs;
mod golden_scan;
mod golden_schema;
mod golden_snapshots;
mod iceberg;
mod layering;
mod maintenance;
mod merge;
mod properties;
mod scan_edges;
mod scan_row_index;
mod snapshot_edges;
mod store_edges;
mod stores;
mod update;
mod writer;
