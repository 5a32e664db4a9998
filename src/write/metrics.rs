//! What a DML operation did: the `commitInfo.operationMetrics` it records
//! (names and string values as Delta Spark writes them) and where it landed.
//! Shared by DELETE with deletion vectors and its copy-on-write fallback.

use serde_json::{json, Value};

/// What a delete did (the commitInfo.operationMetrics, and where it landed).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteMetrics {
    /// The committed version (None: nothing to delete, nothing committed).
    pub version: Option<u64>,
    pub num_deleted_rows: u64,
    pub num_deletion_vectors_added: u64,
    pub num_deletion_vectors_removed: u64,
    pub num_deletion_vectors_updated: u64,
    pub num_removed_files: u64,
    pub num_added_files: u64,
    pub num_dv_files_written: u64,
    /// Rows copied into rewritten files (copy-on-write only).
    pub num_copied_rows: u64,
    pub execution_time_ms: u64,
    /// Commit attempts (1 unless concurrent commits forced retries).
    pub attempts: u32,
    /// Rebases over concurrent DV changes to the same files.
    pub rebases: u32,
    /// A checkpoint was written after the commit (every
    /// `delta.checkpointInterval` versions).
    pub checkpointed: bool,
    /// Why the checkpoint due after the commit could not be written (the
    /// commit itself stands; the next writer will try again).
    pub checkpoint_error: Option<String>,
    /// Why the commit was not mirrored as an Iceberg snapshot (UniForm
    /// tables; the commit stands, the next one catches up).
    pub iceberg_error: Option<String>,
}

impl DeleteMetrics {
    /// The metrics as Delta writes them (string values).
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "numDeletedRows": self.num_deleted_rows.to_string(),
            "numDeletionVectorsAdded": self.num_deletion_vectors_added.to_string(),
            "numDeletionVectorsRemoved": self.num_deletion_vectors_removed.to_string(),
            "numDeletionVectorsUpdated": self.num_deletion_vectors_updated.to_string(),
            "numRemovedFiles": self.num_removed_files.to_string(),
            "numAddedFiles": self.num_added_files.to_string(),
            "numAddedChangeFiles": "0",
            "numCopiedRows": self.num_copied_rows.to_string(),
            "numFilesAfterSkipping": (self.num_removed_files + self.num_deletion_vectors_added
                + self.num_deletion_vectors_updated).to_string(),
            "executionTimeMs": self.execution_time_ms.to_string(),
            "numAddedBytes": "0",
            "numRemovedBytes": "0",
        })
    }
}
