//! Iceberg v3 metadata for Delta tables (UniForm), deletion vectors included.
//! Pure: bytes and values in, bytes out; the writes are in
//! [`crate::write::iceberg`].
//!
//! | file | what |
//! |---|---|
//! | [`puffin`] | Puffin files of `deletion-vector-v1` blobs (the Delta DV's own bytes); checked reader |
//! | [`avro`] | Avro container files through `apache-avro`, Iceberg's schema JSON kept verbatim |
//! | [`manifest`] | v3 manifests (data and DV entries) and manifest lists: schemas, field ids, values |
//! | [`metadata`] | `vN.metadata.json`, Delta → Iceberg schema and types, partition specs, literals and their bound bytes |
//! | [`convert`] | planning one Iceberg snapshot from a Delta snapshot: reused and rewritten manifests, Puffin, metadata |
//!
//! Layout under the table root (as Delta UniForm writes it, plus the Puffin files):
//!
//! ```text
//! metadata/v<N>.metadata.json           one per converted Delta version (put-if-absent)
//! metadata/version-hint.text            N of the latest, for path-based readers
//! metadata/snap-<id>-1-<token>.avro     manifest list of snapshot <id>
//! metadata/<token>-m<k>.avro            data manifests (new or rewritten)
//! metadata/<token>-d<k>.avro            delete manifests
//! metadata/<token>-dv.puffin            the DVs that changed in that commit
//! ```

pub mod avro;
pub mod convert;
pub mod manifest;
pub mod metadata;
pub mod puffin;
