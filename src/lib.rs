//! # deltadv
//!
//! Delta Lake deletion vectors (DVs) on a Rust core.
//!
//! | module              | what it does                                                 | I/O |
//! |---------------------|--------------------------------------------------------------|-----|
//! | [`codec::z85`]      | Z85 exactly as Delta uses it                                  | no  |
//! | [`format::bitmap`]  | RoaringBitmapArray bytes ⇄ `RoaringTreemap` (checked decode)  | no  |
//! | [`format::rows`]    | RoaringBitmapArray bytes → sorted row indexes, no bitmap built (checked) | no |
//! | [`format::file`]    | DV file framing: version, BE size, bitmap, BE CRC-32          | no  |
//! | [`format::descriptor`] | `deletionVector` descriptors, validated at construction    | no  |
//! | [`log::path`]       | typed `_delta_log` file names: parse and format every kind; `normalize_path` for action paths | no |
//! | [`log::features`]   | table features (which deltadv reads, which each write keeps), protocol upgrades and downgrades, type widening | no |
//! | [`log::features::properties`] | every `delta.*` key (table properties, column metadata, domains), read through typed accessors | no |
//! | [`log`]             | actions, segments, replay, schema; [`log::cdf`]: the rows each commit changed | no  |
//! | [`expr`]            | predicates and UPDATE/MERGE values: SQL (sqlparser) or JSON → tree, binding, pruning, Arrow evaluation | no |
//! | [`iceberg`]         | Iceberg v3 metadata for Delta tables (UniForm with DVs): Puffin, Avro manifests, metadata JSON, planning | no |
//! | [`io`]              | the only module that reads storage or names tokio / object_store (runtime, tasks, backoff sleep) | yes |
//! | [`table`]           | snapshots (files, history, time travel) and DV loading        | yes |
//! | [`scan`]            | plan (skipping) -> selection (DV -> keep mask) -> read; [`scan::cdf`]: Change Data Feed reads | yes |
//! | [`write::transaction`] | the one transaction every commit goes through: retries, conflict checks and rebases, in-commit timestamps, row ids, checkpoints | yes |
//! | [`write::conflict`] | the pure conflict checker (winning commit + reads/changes → proceed, rebase, conflict) | no |
//! | [`write::merge::plan`] | every MERGE rule (clause order, assignments, `operationParameters`, metrics, read set), shared with Spark | no |
//! | [`write`](mod@write) | one file per operation (module map in its docs): data files + stats (and `cdc` change files), appends, table creation, DELETE, UPDATE, MERGE, DV files, checkpoints; maintenance: [`write::optimize`] (PURGE/OPTIMIZE), [`write::vacuum`], [`write::restore`], [`write::drop_feature`], [`write::manifest`] | yes |
//!
//! | feature  | effect                                                       |
//! |----------|--------------------------------------------------------------|
//! | `python` | PyO3 bindings, the `deltadv._core` extension module           |
#![cfg_attr(
    test,
    allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

pub mod codec;
pub mod error;
pub mod expr;
pub mod format;
pub mod iceberg;
pub mod io;
pub mod log;
pub mod scan;
pub mod table;
pub mod write;

#[cfg(feature = "python")]
mod python;

pub use error::{Error, Location, Result};
pub use format::descriptor::{DeletionVectorDescriptor, StorageType};
pub use format::file::{DvFileWriter, DvSlot};
pub use roaring::RoaringTreemap;
