//! The compaction-filter hook: user code that sees entries as compaction rewrites them.

/// What a [`CompactionFilter`] decides for one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterDecision {
    /// Keep the entry as it is.
    Keep,
    /// Drop the entry; older versions of the key stay hidden.
    Remove,
    /// Keep the key with this value instead.
    ChangeValue(Vec<u8>),
}

/// Installed in [`crate::ColumnFamilyOptions::compaction_filter`]. It is called for the newest version of each
/// key that no snapshot protects (a snapshot's reads are never changed by a filter), from background
/// threads: it must be cheap and must not call back into the store.
pub trait CompactionFilter: Send + Sync + std::fmt::Debug {
    /// Decides for `key` (holding `value`) while compaction writes it to `output_level`.
    fn filter(&self, output_level: usize, key: &[u8], value: &[u8]) -> FilterDecision;
    /// A name for logs and events.
    fn name(&self) -> &str {
        "compaction-filter"
    }
}
