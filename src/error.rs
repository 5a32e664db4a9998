//! The crate's single error type.
//!
//! Every variant carries enough context to act on: which file (or "inline
//! deletion vector"), at which byte offset, what was expected and what was found.

use std::fmt;

/// Where corrupt bytes were found: a file (with the byte offset of the DV inside
/// it) or an inline descriptor, or bytes handed to us directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// Bytes passed in directly (e.g. `DeletionVector.deserialize`).
    Bytes,
    /// An inline (`i`) descriptor's payload.
    Inline,
    /// A DV file, and the offset of the DV's size field within it.
    File { path: String, dv_offset: u64 },
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Bytes => write!(f, "deletion vector bytes"),
            Location::Inline => write!(f, "inline deletion vector"),
            Location::File { path, dv_offset } => {
                write!(f, "deletion vector file {path} (DV at offset {dv_offset})")
            }
        }
    }
}

/// Errors raised by deltadv.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The bytes of a deletion vector (bitmap, DV file framing, checksum,
    /// cardinality) do not match what the format or the descriptor requires.
    #[error("corrupt {location}: {what} at byte {offset}: expected {expected}, found {actual}")]
    CorruptDeletionVector {
        location: Location,
        /// Byte offset of the problem, relative to the start of the file for
        /// `Location::File`, to the start of the bitmap bytes otherwise.
        offset: u64,
        what: &'static str,
        expected: String,
        actual: String,
    },

    /// A Z85 string that cannot be decoded.
    #[error("invalid Z85 at character {position}: {reason}")]
    InvalidZ85 { position: usize, reason: String },

    /// A deletion vector descriptor that breaks the protocol's rules.
    #[error("invalid deletion vector descriptor: {0}")]
    InvalidDescriptor(String),

    /// A bad argument from the caller (negative row index, out-of-range value …).
    #[error("{0}")]
    InvalidArgument(String),

    /// A predicate outside deltadv's SQL subset (a construct, function or
    /// comparison it does not implement). Callers that can evaluate the
    /// predicate another way (Spark) fall back on this error only.
    #[error("predicate outside deltadv's SQL subset: {0}")]
    UnsupportedPredicate(String),

    /// An allocation that failed (e.g. the row indexes of a huge deletion
    /// vector): reported instead of aborting the process.
    #[error("cannot allocate {bytes} bytes for {what}")]
    OutOfMemory { what: &'static str, bytes: u64 },

    /// A broken invariant inside deltadv (a bug, not bad input): report it.
    #[error("internal error in deltadv (please report it): {0}")]
    Internal(String),

    /// A file that does not exist.
    #[error("file not found: {path}")]
    NotFound { path: String },

    /// A data file the table's log references is not in storage (vacuumed too
    /// early, or deleted outside Delta).
    #[error("the table references data file {path}, which does not exist (vacuumed, or deleted outside Delta)")]
    MissingDataFile { path: String },

    /// The store refused access to a path (permission denied or bad credentials).
    #[error("permission denied on {path}: {detail}")]
    PermissionDenied { path: String, detail: String },

    /// Creating a table where a Delta table already exists.
    #[error("a Delta table already exists at {0}")]
    TableExists(String),

    /// Any other I/O failure, with the path it happened on.
    #[error("I/O error on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },

    /// A Delta log that breaks the protocol: a missing version, a malformed
    /// line, a checkpoint that disagrees with `_last_checkpoint`, an illegal
    /// duplicate action. `file` names the log file.
    #[error("corrupt Delta log: {file}: {detail}")]
    CorruptLog { file: String, detail: String },

    /// Iceberg metadata (a `metadata/` JSON, manifest list, manifest or Puffin
    /// file of the UniForm mirror) that cannot be read back. `file` names it.
    #[error("corrupt Iceberg metadata: {file}: {detail}")]
    CorruptIceberg { file: String, detail: String },

    /// The table needs something deltadv does not implement (a reader
    /// feature, a protocol version, a type). Raised before any data is read.
    #[error("unsupported: {0}")]
    Unsupported(String),

    /// A concurrent commit changed what this transaction read or changes, in a
    /// way it cannot be rebased over. Nothing was committed.
    #[error("commit conflict at version {version}: {detail}")]
    Conflict { version: u64, detail: String },

    /// A table schema that cannot be parsed or converted.
    #[error("invalid schema: {0}")]
    Schema(String),

    /// A written row breaks a rule of the table: a CHECK constraint, a NOT
    /// NULL column, an invariant, a generated column's expression or an
    /// identity column. The message is Delta Spark's (the rule, and the row's
    /// values). Nothing was committed.
    #[error("{0}")]
    ConstraintViolation(String),

    /// A streaming read met a commit it may not read past: one that removes
    /// or rewrites rows (without `ignoreDeletes`/`skipChangeCommits`), or a
    /// schema change. The message is Delta Spark's, naming the version.
    #[error("{detail}")]
    StreamSourceChanged { version: u64, detail: String },

    /// The requested version (or timestamp) does not exist in the table.
    #[error("version not found: {0}")]
    VersionNotFound(String),

    /// Not a Delta table (no `_delta_log`, or no commits in it).
    #[error("{0}")]
    NotATable(String),

    /// A failure from an object store, with the path.
    #[error("object store error on {path}: {source}")]
    ObjectStore {
        path: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// Parquet or Arrow failures, with the file.
    #[error("parquet/arrow error in {file}: {detail}")]
    Parquet { file: String, detail: String },

    /// JSON that cannot be parsed into the expected shape.
    #[error("invalid JSON in {context}: {source}")]
    Json {
        context: String,
        #[source]
        source: serde_json::Error,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for a [`Error::CorruptDeletionVector`] at `offset` in plain bytes.
    pub(crate) fn corrupt(
        offset: u64,
        what: &'static str,
        expected: impl fmt::Display,
        actual: impl fmt::Display,
    ) -> Self {
        Error::CorruptDeletionVector {
            location: Location::Bytes,
            offset,
            what,
            expected: expected.to_string(),
            actual: actual.to_string(),
        }
    }

    /// Re-anchor a corruption error found in a sub-slice: set its location and
    /// shift its offset by `base` (the slice's position within that location).
    /// Other errors pass through unchanged.
    pub(crate) fn relocate(self, location: &Location, base: u64) -> Self {
        match self {
            Error::CorruptDeletionVector {
                offset,
                what,
                expected,
                actual,
                ..
            } => Error::CorruptDeletionVector {
                location: location.clone(),
                offset: offset.saturating_add(base),
                what,
                expected,
                actual,
            },
            Error::InvalidZ85 { position, reason } if *location == Location::Inline => {
                Error::CorruptDeletionVector {
                    location: Location::Inline,
                    offset: position as u64,
                    what: "Z85 character",
                    expected: "a valid Z85 group".to_string(),
                    actual: reason,
                }
            }
            other => other,
        }
    }
}
