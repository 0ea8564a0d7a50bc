//! Leveled compaction: the picker chooses what to merge, the job merges it.

mod covered;
mod filter;
mod job;
mod picker;
mod relocate;

pub(crate) use covered::covered_tables;
pub use filter::{CompactionFilter, FilterDecision};
pub(crate) use job::{BlobContext, JobContext, run};
pub(crate) use picker::{
    CompactionSpec, build, level_targets, pending_compaction_bytes, pick, scores,
};
