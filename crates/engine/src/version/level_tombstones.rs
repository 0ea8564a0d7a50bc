//! The range tombstones of one level below L0, as a `TombstoneCursor` source: the level's files
//! holding tombstones, each table's read from the table cache when a key first falls in it.

use std::sync::Arc;

use super::FileMetaData;
use crate::error::Result;
use crate::key;
use crate::range_del::{FragmentedTombstones, KeyBounds, LevelSource, TombstoneCursor};
use crate::sst::TableCache;

/// The tables of one level below L0 that hold range tombstones; they do not overlap.
pub(crate) struct LevelTombstones {
    tables: Arc<TableCache>,
    level: usize,
    files: Vec<Arc<FileMetaData>>,
    /// Each file's fragmented tombstones, read from its table when first needed.
    loaded: Vec<Option<Arc<FragmentedTombstones>>>,
    /// The file the last answer came from.
    file: usize,
}

impl LevelTombstones {
    /// A cursor over the tombstones of `level`'s `files`; `None` when none of them holds one.
    pub(crate) fn cursor(
        tables: Arc<TableCache>,
        level: usize,
        files: &[Arc<FileMetaData>],
    ) -> Option<TombstoneCursor> {
        let files: Vec<_> = files
            .iter()
            .filter(|f| f.num_range_deletions > 0)
            .cloned()
            .collect();
        (!files.is_empty()).then(|| {
            TombstoneCursor::over_level(Box::new(LevelTombstones {
                tables,
                level,
                loaded: vec![None; files.len()],
                files,
                file: 0,
            }))
        })
    }
}

impl LevelSource for LevelTombstones {
    /// A file's tombstones end at or before its largest key, so the file to ask is the first one
    /// ending above `user_key`.
    fn find_table(&mut self, user_key: &[u8]) -> Result<bool> {
        let ends_above = |f: &FileMetaData| key::user_key(&f.largest) > user_key;
        let holds = |f: &FileMetaData| ends_above(f) && key::user_key(&f.smallest) <= user_key;
        if !self.files.get(self.file).is_some_and(|f| holds(f)) {
            self.file = self.files.partition_point(|f| !ends_above(f));
            if !self.files.get(self.file).is_some_and(|f| holds(f)) {
                return Ok(false);
            }
        }
        if self.loaded[self.file].is_none() {
            let table = self.tables.get(self.files[self.file].number, self.level)?;
            self.loaded[self.file] = Some(table.range_tombstones().clone());
        }
        Ok(true)
    }

    fn current_index(&self) -> usize {
        self.file
    }

    fn current(&self) -> Option<(&FragmentedTombstones, KeyBounds<'_>)> {
        let f = self.files.get(self.file)?;
        let list = self.loaded.get(self.file)?.as_deref()?;
        Some((
            list,
            (key::user_key(&f.smallest), key::user_key(&f.largest)),
        ))
    }

    /// A file's tombstones end at or before its largest key, so the gap starts there.
    fn gap_around(&self) -> (Option<&[u8]>, Option<&[u8]>) {
        let lo = self
            .file
            .checked_sub(1)
            .and_then(|p| self.files.get(p))
            .map(|f| key::user_key(&f.largest));
        let hi = self
            .files
            .get(self.file)
            .map(|f| key::user_key(&f.smallest));
        (lo, hi)
    }
}
