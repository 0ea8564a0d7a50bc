//! Iterating a table: the index picks the data block, the block iterator walks it.

use std::sync::Arc;

use super::format::BlockHandle;
use super::reader::{BlockReadOptions, TableReader};
use crate::block::BlockIter;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;

impl TableReader {
    pub(crate) fn iter(self: &Arc<Self>, opts: BlockReadOptions) -> Result<TableIter> {
        Ok(TableIter {
            table: self.clone(),
            index: self.index_block(false)?.iter(),
            data: None,
            data_handle: None,
            opts,
            error: None,
        })
    }
}

/// Two-level iteration: the index picks the data block, the block iterator walks it.
pub(crate) struct TableIter {
    table: Arc<TableReader>,
    index: BlockIter,
    data: Option<BlockIter>,
    data_handle: Option<BlockHandle>,
    opts: BlockReadOptions,
    error: Option<Error>,
}

impl TableIter {
    fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self.data = None;
        self.data_handle = None;
    }

    fn load_data_block(&mut self) {
        if !self.index.valid() {
            if let Err(e) = self.table.corrupt_in(&self.index) {
                self.fail(e);
            }
            self.data = None;
            self.data_handle = None;
            return;
        }
        let handle = match self.table.decode_handle(self.index.value()) {
            Ok(h) => h,
            Err(e) => return self.fail(e),
        };
        if self.data_handle == Some(handle) && self.data.is_some() {
            return;
        }
        match self.table.data_block(handle, self.opts) {
            Ok(b) => {
                self.data = Some(b.iter());
                self.data_handle = Some(handle);
            }
            Err(e) => self.fail(e),
        }
    }

    fn check_data_error(&mut self) -> bool {
        if let Some(d) = &self.data
            && let Err(e) = self.table.corrupt_in(d)
        {
            self.fail(e);
            return true;
        }
        false
    }

    /// Moves past data blocks with nothing left in the direction of travel.
    fn skip_empty_blocks(&mut self, forward: bool) {
        while self.error.is_none() && !self.data.as_ref().is_some_and(|d| d.valid()) {
            if self.check_data_error() || !self.index.valid() {
                self.data = None;
                return;
            }
            if forward {
                self.index.next();
            } else {
                self.index.prev();
            }
            self.load_data_block();
            if let Some(d) = self.data.as_mut() {
                if forward {
                    d.seek_to_first();
                } else {
                    d.seek_to_last();
                }
            }
        }
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.error.is_none() && self.data.as_ref().is_some_and(|d| d.valid())
    }

    fn seek_to_first(&mut self) {
        self.index.seek_to_first();
        self.load_data_block();
        if let Some(d) = self.data.as_mut() {
            d.seek_to_first();
        }
        self.skip_empty_blocks(true);
    }

    fn seek_to_last(&mut self) {
        self.index.seek_to_last();
        self.load_data_block();
        if let Some(d) = self.data.as_mut() {
            d.seek_to_last();
        }
        self.skip_empty_blocks(false);
    }

    fn seek(&mut self, target: &[u8]) {
        self.index.seek(target);
        self.load_data_block();
        if let Some(d) = self.data.as_mut() {
            d.seek(target);
        }
        self.skip_empty_blocks(true);
    }

    fn next(&mut self) {
        if let Some(d) = self.data.as_mut() {
            d.next();
        }
        self.skip_empty_blocks(true);
    }

    fn prev(&mut self) {
        if let Some(d) = self.data.as_mut() {
            d.prev();
        }
        self.skip_empty_blocks(false);
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.key())
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.value())
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}
