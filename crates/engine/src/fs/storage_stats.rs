//! What a storage backend other than the local disk reports about itself: a bucket store's
//! requests, bytes moved, cache and writer epoch. The doors show it as they find it.

use serde::Serialize;

/// A storage backend's own counters, since the store opened.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StorageStats {
    /// Where the store lives (`s3://BUCKET/PREFIX`).
    pub location: String,
    /// How far a synced write goes before it returns: `local` or `bucket`.
    pub durability: String,
    /// This writer's epoch: each open for writing takes the next; 0 when opened to read.
    pub writer_epoch: u64,
    /// Records this writer added to the store's log.
    pub log_records: u64,
    /// GET and HEAD requests.
    pub gets: u64,
    /// PUT requests.
    pub puts: u64,
    /// DELETE requests (one per multi-object delete).
    pub deletes: u64,
    /// LIST requests.
    pub lists: u64,
    /// Bytes uploaded.
    pub bytes_up: u64,
    /// Bytes downloaded.
    pub bytes_down: u64,
    /// Opens of a file the local cache held.
    pub cache_hits: u64,
    /// Opens of a file that had to be fetched from the bucket first.
    pub cache_misses: u64,
    /// Bytes of the store's files in the local cache.
    pub cache_bytes: u64,
    /// Changes waiting for the next log record.
    pub upload_queue: u64,
    /// A reader's lease on the version it reads (its pin's name), which garbage collection
    /// keeps; `None` for a writer, a checkpoint, or a reader the bucket let write none.
    pub reader_lease: Option<String>,
    /// The reader's lease lapsed (renewals failed for its whole time): garbage collection may
    /// delete files this reader has not fetched yet.
    pub reader_lease_lapsed: bool,
}
