//! Iterates one level below L0 as a single sorted run: its files do not overlap, so only the file
//! holding the current position is open, and a seek touches one file instead of all of them.

use std::sync::Arc;

use super::FileMetaData;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use crate::sst::{BlockReadOptions, TableCache, TableIter};

pub(crate) struct LevelIter {
    tables: Arc<TableCache>,
    files: Vec<Arc<FileMetaData>>,
    level: usize,
    read: BlockReadOptions,
    index: usize,
    current: Option<TableIter>,
    error: Option<Error>,
}

impl LevelIter {
    pub(crate) fn new(
        tables: Arc<TableCache>,
        files: Vec<Arc<FileMetaData>>,
        level: usize,
        read: BlockReadOptions,
    ) -> Self {
        let index = files.len();
        LevelIter {
            tables,
            files,
            level,
            read,
            index,
            current: None,
            error: None,
        }
    }

    /// Opens file `index` (or clears the position when it is out of range).
    fn open(&mut self, index: usize) -> bool {
        self.index = index;
        self.current = None;
        if index >= self.files.len() || self.error.is_some() {
            return false;
        }
        match self
            .tables
            .get(self.files[index].number, self.level)
            .and_then(|t| t.iter(self.read))
        {
            Ok(it) => {
                self.current = Some(it);
                true
            }
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    fn current_valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn take_child_error(&mut self) -> bool {
        if let Some(Err(e)) = self.current.as_ref().map(|c| c.status()) {
            self.error = Some(e);
            self.current = None;
            return true;
        }
        false
    }

    fn skip_forward(&mut self) {
        while !self.current_valid() {
            if self.take_child_error() || self.index + 1 >= self.files.len() {
                self.current = None;
                return;
            }
            if self.open(self.index + 1)
                && let Some(c) = self.current.as_mut()
            {
                c.seek_to_first();
            }
        }
    }

    fn skip_backward(&mut self) {
        while !self.current_valid() {
            if self.take_child_error() || self.index == 0 || self.index > self.files.len() {
                self.current = None;
                return;
            }
            if self.open(self.index - 1)
                && let Some(c) = self.current.as_mut()
            {
                c.seek_to_last();
            }
        }
    }
}

impl InternalIterator for LevelIter {
    fn valid(&self) -> bool {
        self.error.is_none() && self.current_valid()
    }

    fn seek_to_first(&mut self) {
        if self.open(0)
            && let Some(c) = self.current.as_mut()
        {
            c.seek_to_first();
        }
        self.skip_forward();
    }

    fn seek_to_last(&mut self) {
        if let Some(last) = self.files.len().checked_sub(1)
            && self.open(last)
            && let Some(c) = self.current.as_mut()
        {
            c.seek_to_last();
        }
        self.skip_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        let i = self
            .files
            .partition_point(|f| compare_internal(&f.largest, target) == std::cmp::Ordering::Less);
        if self.open(i)
            && let Some(c) = self.current.as_mut()
        {
            c.seek(target);
        }
        self.skip_forward();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        // The last file whose smallest key is <= target holds the answer, or the one before it.
        let i = self.files.partition_point(|f| {
            compare_internal(&f.smallest, target) != std::cmp::Ordering::Greater
        });
        match i.checked_sub(1) {
            Some(i) => {
                if self.open(i)
                    && let Some(c) = self.current.as_mut()
                {
                    c.seek_for_prev(target);
                }
                self.skip_backward();
            }
            None => {
                self.current = None;
                self.index = self.files.len();
            }
        }
    }

    fn next(&mut self) {
        if let Some(c) = self.current.as_mut() {
            c.next();
        }
        self.skip_forward();
    }

    fn prev(&mut self) {
        if let Some(c) = self.current.as_mut() {
            c.prev();
        }
        self.skip_backward();
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.key())
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.value())
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}
