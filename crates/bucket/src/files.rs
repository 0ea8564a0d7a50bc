//! The engine's open files on a bucket store: local files in the working copy whose syncs also
//! reach the log, each as its kind of file needs (doc/format.md, "A store in a bucket").

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;
use strata_engine::{Durability, PositionalFile, Result, WritableFile};

use crate::shared::Shared;

/// What a file is to the bucket, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// `MANIFEST-*`, `CURRENT` and its temporary: each sync is a record of its own.
    Meta,
    /// A table: placed whole when synced (it is synced once, complete).
    Table,
    /// A blob file: appends ride with the next record; placed whole when sealed.
    Blob,
    /// A value file being written at offsets (`*.blob.tmp`): its synced ranges ride with the next
    /// record.
    ValueFile,
    /// A WAL: a record per sync at `Remote` durability; a `Local` sync stays on this disk.
    Wal,
    /// Not part of the store's data (the locks, the disk reserve, the serve token).
    Local,
}

impl Class {
    pub fn of(name: &str) -> Class {
        if name == "CURRENT" || name == "CURRENT.tmp" || name.starts_with("MANIFEST-") {
            Class::Meta
        } else if name.ends_with(".sst") {
            Class::Table
        } else if name.ends_with(".blob") {
            Class::Blob
        } else if name.ends_with(".blob.tmp") {
            Class::ValueFile
        } else if name.ends_with(".log") {
            Class::Wal
        } else {
            Class::Local
        }
    }
}

/// A file appended to by one writer.
#[derive(Debug)]
pub struct LoggedFile {
    pub(crate) shared: Arc<Shared>,
    pub(crate) name: String,
    pub(crate) path: PathBuf,
    pub(crate) class: Class,
    pub(crate) inner: Box<dyn WritableFile>,
    pub(crate) len: u64,
    /// How much of the file the log has (or has queued).
    pub(crate) logged: u64,
}

impl LoggedFile {
    pub(crate) fn new(
        shared: Arc<Shared>,
        name: String,
        path: &std::path::Path,
        inner: Box<dyn WritableFile>,
        len: u64,
        logged: u64,
    ) -> LoggedFile {
        let class = Class::of(&name);
        if class == Class::Wal {
            shared.wal_logged.lock().insert(name.clone(), logged);
        }
        LoggedFile {
            shared,
            class,
            name,
            path: path.to_path_buf(),
            inner,
            len,
            logged,
        }
    }

    /// Brings the log up to the file's length, as its kind of file needs.
    fn log_synced(&mut self, sealing: bool) -> Result<()> {
        let shared = &self.shared;
        match self.class {
            Class::Local => {}
            Class::Table => {
                if self.len != self.logged {
                    let placed = shared.place(&self.name, &self.path, self.len)?;
                    shared.log()?.defer(placed);
                }
            }
            Class::Blob if sealing => {
                let placed = shared.place(&self.name, &self.path, self.len)?;
                shared.log()?.defer(placed);
            }
            Class::Wal => return self.ship_wal(),
            Class::Meta => {
                let entries =
                    shared.ranges_as_entries(&self.name, &self.path, &[(self.logged, self.len)])?;
                shared.commit(entries)?;
            }
            Class::Blob | Class::ValueFile => {
                let entries =
                    shared.ranges_as_entries(&self.name, &self.path, &[(self.logged, self.len)])?;
                let log = shared.log()?;
                for e in entries {
                    log.defer(e);
                }
            }
        }
        self.logged = self.len;
        Ok(())
    }

    /// Sends the WAL's bytes the log lacks, in one record, after those of every older WAL still
    /// in the store: a `Remote` write then carries every write before it, and no WAL's copy in
    /// the bucket ends short of its seal while a newer one holds anything.
    fn ship_wal(&mut self) -> Result<()> {
        self.ship_wal_in_order()?;
        self.shared.write_due_checkpoint();
        Ok(())
    }

    fn ship_wal_in_order(&mut self) -> Result<()> {
        let shared = &self.shared;
        shared.wait_for_wal_commit();
        let _order = shared.wal_order.lock();
        let older = shared.older_wal_tails(&self.name)?;
        let mut entries = Vec::new();
        for (name, from, to) in &older {
            let path = shared.root.join(name);
            entries.extend(shared.ranges_as_entries(name, &path, &[(*from, *to)])?);
        }
        entries.extend(shared.ranges_as_entries(
            &self.name,
            &self.path,
            &[(self.logged, self.len)],
        )?);
        shared.commit_leaving_checkpoint(entries)?;
        let mut logged = shared.wal_logged.lock();
        for (name, _, to) in older {
            logged.insert(name, to);
        }
        self.logged = self.len;
        logged.insert(self.name.clone(), self.logged);
        Ok(())
    }

    /// A WAL synced for `Local` durability stays on this disk: its writes are acknowledged only
    /// while this writer holds its lease (`Shared::hold_lease`). The bytes reach the bucket at
    /// the next `Remote` sync, always from where the last one ended, so the bucket's copy of a
    /// WAL is a prefix of the local one.
    fn sync_wal(&mut self, durability: Durability) -> Result<()> {
        match durability {
            Durability::Local => self.shared.hold_lease(),
            Durability::Remote => self.log_synced(false),
        }
    }
}

impl WritableFile for LoggedFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if self.class == Class::Wal {
            self.shared.check_before_append()?;
        } else {
            self.shared.check_writable()?;
        }
        self.inner.append(data)?;
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }

    fn sync(&mut self) -> Result<()> {
        self.sync_to(self.shared.durability)
    }

    fn sync_not_before(&self, durability: Option<Durability>) -> Option<std::time::Instant> {
        let ships = durability.unwrap_or(self.shared.durability) == Durability::Remote;
        (self.class == Class::Wal && ships)
            .then(|| self.shared.next_wal_commit_at())
            .flatten()
    }

    fn sync_to(&mut self, durability: Durability) -> Result<()> {
        self.inner.sync()?;
        match self.class {
            Class::Wal => self.sync_wal(durability),
            _ => self.log_synced(false),
        }
    }

    fn finish(&mut self) -> Result<()> {
        self.inner.finish()?;
        match self.class {
            // A sealed WAL: its copy in the bucket, if it has begun one, is completed (seal
            // included) before any newer WAL or MANIFEST record can follow it.
            Class::Wal if self.logged > 0 || self.shared.durability == Durability::Remote => {
                self.ship_wal()
            }
            Class::Wal => Ok(()),
            _ => self.log_synced(true),
        }
    }
}

/// Where an open value file is now: the engine renames it (`.blob.tmp` to `.blob`) while it
/// still holds it, and its later syncs must log under, and read from, the new name.
pub(crate) type Location = Arc<Mutex<(String, PathBuf)>>;

/// A value file, written at offsets: the ranges written since the last sync are logged at the
/// next one.
#[derive(Debug)]
pub struct LoggedPositional {
    pub(crate) shared: Arc<Shared>,
    pub(crate) at: Location,
    pub(crate) inner: Box<dyn PositionalFile>,
    /// Written, not yet logged: start → end, disjoint and not touching.
    pub(crate) dirty: Mutex<BTreeMap<u64, u64>>,
}

impl LoggedPositional {
    fn mark(&self, start: u64, end: u64) {
        let mut dirty = self.dirty.lock();
        let (mut start, mut end) = (start, end);
        let touching: Vec<(u64, u64)> = dirty
            .range(..=end)
            .rev()
            .take_while(|&(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            dirty.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        dirty.insert(start, end);
    }
}

impl PositionalFile for LoggedPositional {
    fn write_all_at(&self, data: &[u8], offset: u64) -> Result<()> {
        self.shared.check_writable()?;
        self.inner.write_all_at(data, offset)?;
        self.mark(offset, offset + data.len() as u64);
        Ok(())
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_exact_at(buf, offset)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.shared.check_writable()?;
        self.inner.set_len(len)?;
        let mut dirty = self.dirty.lock();
        // What lies past the new end is gone: the log must not read it back at the next sync.
        dirty.retain(|&s, _| s < len);
        for e in dirty.values_mut() {
            *e = (*e).min(len);
        }
        drop(dirty);
        let name = self.at.lock().0.clone();
        self.shared
            .log()?
            .defer(crate::record::Entry::Truncate { name, len });
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()?;
        let (name, path) = self.at.lock().clone();
        let ranges: Vec<(u64, u64)> = std::mem::take(&mut *self.dirty.lock())
            .into_iter()
            .collect();
        let entries = match self.shared.ranges_as_entries(&name, &path, &ranges) {
            Ok(entries) => entries,
            Err(e) => {
                // Not logged: still to log at the next sync.
                for (start, end) in ranges {
                    self.mark(start, end);
                }
                return Err(e);
            }
        };
        let log = self.shared.log()?;
        for e in entries {
            log.defer(e);
        }
        Ok(())
    }
}

impl Drop for LoggedPositional {
    fn drop(&mut self) {
        self.shared
            .moving
            .lock()
            .retain(|_, at| !Arc::ptr_eq(at, &self.at));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_what_reaches_the_bucket() {
        assert_eq!(Class::of("MANIFEST-000007"), Class::Meta);
        assert_eq!(Class::of("CURRENT"), Class::Meta);
        assert_eq!(Class::of("CURRENT.tmp"), Class::Meta);
        assert_eq!(Class::of("000012.sst"), Class::Table);
        assert_eq!(Class::of("000012.blob"), Class::Blob);
        assert_eq!(Class::of("000012.blob.tmp"), Class::ValueFile);
        assert_eq!(Class::of("000012.log"), Class::Wal);
        assert_eq!(Class::of("LOCK"), Class::Local);
        assert_eq!(Class::of("RESERVE"), Class::Local);
        assert_eq!(Class::of("serve.token"), Class::Local);
    }
}
