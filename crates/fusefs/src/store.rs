//! The filesystem's view of the store: entries resolved from the data and metadata column
//! families, directory listings stepped child by child, and the batches every change is.

use std::sync::Arc;

use strata_engine::{ColumnFamily, ColumnFamilyOptions, Db, DbIterator, ReadOptions, WriteBatch};
use strata_engine::{Compression, Expiration, Options, WriteOptions};

use crate::error::{FsError, Result};
use crate::meta::{Kind, Meta};
use crate::path::{self, Position};

/// The metadata column family that goes with data column family `cf`.
pub fn meta_cf_name(cf: &str) -> String {
    format!("{cf}.fsmeta")
}

/// Column family options for a mounted data column family: values of 64 KiB and more go to
/// blob files, so a large file is not rewritten by every compaction; and a file's bytes are
/// stored as written, as a file system stores them: compressing blob chunks would cost every
/// write of the mount, and every ranged read the decompression of a whole chunk (zstd held
/// sequential writes to 137 MB/s and 4 KiB random reads to 47 µs).
pub fn data_cf_options(mut o: ColumnFamilyOptions) -> ColumnFamilyOptions {
    o.enable_blob_files = true;
    o.min_blob_size = 64 << 10;
    o.blob_compression = Compression::None;
    o
}

/// Sets `opts` up to mount `cf`: its options (when `cf` is the default column family, or named
/// in `opts.column_families`) get blob files.
pub fn prepare_options(opts: &mut Options, cf: &str) {
    if cf == "default" {
        opts.cf = data_cf_options(opts.cf.clone());
    } else {
        let o = opts.column_families.remove(cf).unwrap_or_default();
        opts.column_families
            .insert(cf.to_string(), data_cf_options(o));
    }
}

/// Adds to `batch` the deletion of every key in `[start, end)` of data column family `cf` and,
/// when a mount keeps metadata for `cf`, of the records of the same paths. Other faces delete
/// ranges this way, so a deleted subtree leaves no directory behind in the mount.
pub fn delete_range_with_metadata(
    db: &Db,
    batch: &mut WriteBatch,
    cf: &ColumnFamily,
    start: &[u8],
    end: &[u8],
) {
    batch.delete_range_cf(cf, start, end);
    if let Ok(meta) = db.cf(&meta_cf_name(cf.name())) {
        batch.delete_range_cf(&meta, start, end);
    }
}

/// Adds to `batch` the deletion of `key` of data column family `cf` and, when a mount keeps
/// metadata for `cf`, of the file's record: a file deleted by another door and written again
/// comes back with default mode, owner and no attributes, as a new file does.
pub fn delete_with_metadata(db: &Db, batch: &mut WriteBatch, cf: &ColumnFamily, key: &[u8]) {
    batch.delete_cf(cf, key);
    if let Ok(meta) = db.cf(&meta_cf_name(cf.name())) {
        batch.delete_cf(&meta, key);
    }
}

/// One resolved entry.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub kind: Kind,
    /// A regular file's length; 0 for the rest (a symlink's is its target's).
    pub size: u64,
    /// Its record, when one was written (keys from other faces have none).
    pub meta: Option<Meta>,
    /// When the value expires, in seconds since the Unix epoch (a key another face wrote with
    /// a TTL); 0 for never. The kernel keeps the entry no longer than that.
    pub expires: u64,
}

/// The two column families and how they are read and written.
#[derive(Debug)]
pub(crate) struct Store {
    pub db: Arc<Db>,
    pub data: ColumnFamily,
    pub meta: ColumnFamily,
    pub read_only: bool,
}

/// The key of an entry's metadata record: a directory's ends in `/` (the root's is `/`), so it
/// sits where the directory's children start.
pub(crate) fn meta_key(key: &[u8], kind: Kind) -> Vec<u8> {
    let mut k = key.to_vec();
    if kind == Kind::Dir {
        k.push(b'/');
    }
    k
}

fn display(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

impl Store {
    /// Opens (creating when writable and missing) the data column family `cf` and its metadata
    /// column family.
    pub(crate) fn new(db: Arc<Db>, cf: &str, read_only: bool) -> Result<Store> {
        let open = |name: &str, o: ColumnFamilyOptions| -> Result<ColumnFamily> {
            match db.cf(name) {
                Ok(cf) => Ok(cf),
                Err(_) if !read_only => Ok(db.create_cf(name, o)?),
                Err(e) => Err(e.into()),
            }
        };
        let data = open(cf, data_cf_options(ColumnFamilyOptions::default()))?;
        let meta = match open(&meta_cf_name(cf), ColumnFamilyOptions::default()) {
            Ok(m) => Some(m),
            Err(_) if read_only => None,
            Err(e) => return Err(e),
        };
        // A read-only mount of a store no mount ever wrote: its records are all defaults.
        let meta = meta.unwrap_or_else(|| data.clone());
        Ok(Store {
            db,
            data,
            meta,
            read_only,
        })
    }

    fn has_meta_cf(&self) -> bool {
        self.meta.id() != self.data.id()
    }

    pub(crate) fn get_meta(&self, meta_key: &[u8]) -> Result<Option<Meta>> {
        if !self.has_meta_cf() {
            return Ok(None);
        }
        match self.db.get_cf(&self.meta, meta_key)? {
            None => Ok(None),
            Some(v) => Meta::decode(&v)
                .map(Some)
                .map_err(|source| FsError::BadMeta {
                    key: display(meta_key),
                    source,
                }),
        }
    }

    /// Whether any key of `cf` lies in `[from, to)`.
    fn any_in(&self, cf: &ColumnFamily, from: &[u8], to: Option<Vec<u8>>) -> Result<bool> {
        let mut it = self.iter(cf, Some(from.to_vec()), to, true)?;
        it.seek(from);
        let found = it.valid();
        it.status()?;
        Ok(found)
    }

    pub(crate) fn iter(
        &self,
        cf: &ColumnFamily,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        keys_only: bool,
    ) -> Result<DbIterator> {
        let opts = ReadOptions {
            lower_bound: lower,
            upper_bound: upper,
            keys_only,
            ..Default::default()
        };
        Ok(self.db.iter_cf(&opts, cf)?)
    }

    /// The non-directory entry at `key`: a regular file if the data column family holds it,
    /// else a metadata record of another kind (a symlink, a fifo ...).
    pub(crate) fn resolve_leaf(&self, key: &[u8]) -> Result<Option<Entry>> {
        // A large file's length comes from its blob index: a stat never reads the file.
        if let Some(info) = self.db.value_info_cf(&self.data, key)? {
            let meta = self.get_meta(key)?.filter(|m| m.kind == Kind::File);
            return Ok(Some(Entry {
                kind: Kind::File,
                size: info.len,
                meta,
                expires: match info.expiration {
                    Expiration::At(at) => at,
                    _ => 0,
                },
            }));
        }
        Ok(self
            .get_meta(key)?
            .filter(|m| !matches!(m.kind, Kind::File | Kind::Dir))
            .map(|m| Entry {
                kind: m.kind,
                size: m.target.len() as u64,
                meta: Some(m),
                expires: 0,
            }))
    }

    /// The entry at `key`: a file or other leaf first (a key that is both a file and the prefix
    /// of other keys shows as the file), else a directory made by `mkdir` or implied by keys
    /// below it.
    pub(crate) fn resolve(&self, key: &[u8]) -> Result<Option<Entry>> {
        if key.is_empty() {
            return Ok(Some(self.dir_entry(key)?));
        }
        if let Some(e) = self.resolve_leaf(key)? {
            return Ok(Some(e));
        }
        if let Some(m) = self.get_meta(&meta_key(key, Kind::Dir))? {
            return Ok(Some(Entry {
                kind: Kind::Dir,
                size: 0,
                meta: Some(m),
                expires: 0,
            }));
        }
        let prefix = path::dir_prefix(key);
        let end = path::subtree_end(key);
        if self.any_in(&self.data, &prefix, end.clone())?
            || (self.has_meta_cf() && self.any_in(&self.meta, &prefix, end)?)
        {
            return Ok(Some(Entry {
                kind: Kind::Dir,
                size: 0,
                meta: None,
                expires: 0,
            }));
        }
        Ok(None)
    }

    fn dir_entry(&self, key: &[u8]) -> Result<Entry> {
        Ok(Entry {
            kind: Kind::Dir,
            size: 0,
            meta: self.get_meta(&meta_key(key, Kind::Dir))?,
            expires: 0,
        })
    }

    /// Whether directory `key` has any key below it, visible or not: `rmdir` never deletes
    /// what a listing hides.
    pub(crate) fn dir_has_children(&self, key: &[u8]) -> Result<bool> {
        let prefix = path::dir_prefix(key);
        let end = path::subtree_end(key);
        if self.any_in(&self.data, &prefix, end.clone())? {
            return Ok(true);
        }
        if !self.has_meta_cf() {
            return Ok(false);
        }
        // The directory's own record is `prefix` itself.
        let mut after = prefix.clone();
        after.push(0);
        self.any_in(&self.meta, &after, end)
    }

    /// `EROFS` when mounted read-only.
    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(FsError::posix(libc::EROFS, "mounted read-only"));
        }
        Ok(())
    }

    /// Writes `batch` (sync: durable when this returns).
    pub(crate) fn write(&self, batch: WriteBatch, sync: bool) -> Result<()> {
        self.check_writable()?;
        let opts = WriteOptions {
            sync,
            ..Default::default()
        };
        Ok(self.db.write(batch, &opts)?)
    }

    pub(crate) fn put_meta(&self, batch: &mut WriteBatch, key: &[u8], meta: &Meta) {
        batch.put_cf(&self.meta, meta_key(key, meta.kind), meta.encode());
    }

    /// Adds to `batch` the deletion of the entry at `key` (of `kind`) and, for a directory,
    /// everything below it.
    pub(crate) fn delete_entry(&self, batch: &mut WriteBatch, key: &[u8], kind: Kind) {
        if kind == Kind::Dir {
            let prefix = path::dir_prefix(key);
            if let Some(end) = path::subtree_end(key) {
                batch.delete_range_cf(&self.data, &prefix, &end);
                batch.delete_range_cf(&self.meta, &prefix, &end);
            }
        } else {
            batch.delete_cf(&self.data, key);
            batch.delete_cf(&self.meta, key);
        }
    }

    /// The keys of the entry at `key` in `cf` and, for a directory, every key below it (only
    /// the keys: a rename moves values by reference, never reading them).
    pub(crate) fn keys_of(
        &self,
        cf: &ColumnFamily,
        key: &[u8],
        kind: Kind,
    ) -> Result<Vec<Vec<u8>>> {
        if kind != Kind::Dir {
            let there = if cf.id() == self.data.id() {
                self.db.value_size_cf(cf, key)?.is_some()
            } else {
                self.has_meta_cf() && self.db.get_cf(cf, key)?.is_some()
            };
            return Ok(if there {
                vec![key.to_vec()]
            } else {
                Vec::new()
            });
        }
        if cf.id() == self.meta.id() && !self.has_meta_cf() {
            return Ok(Vec::new());
        }
        let prefix = path::dir_prefix(key);
        let mut out = Vec::new();
        let mut it = self.iter(cf, Some(prefix.clone()), path::subtree_end(key), true)?;
        it.seek(&prefix);
        while it.valid() {
            out.push(it.key().to_vec());
            it.next();
        }
        it.status()?;
        Ok(out)
    }

    /// Deletes the bytes of files that were unlinked while open and never closed (the mount
    /// stopped first): no path names them, so nothing else ever will.
    pub(crate) fn reclaim_orphans(&self) -> Result<()> {
        let (start, end) = crate::inodes::orphan_range();
        if !self.any_in(&self.data, &start, Some(end.clone()))? {
            return Ok(());
        }
        let mut batch = WriteBatch::new();
        batch.delete_range_cf(&self.data, &start, &end);
        self.write(batch, false)
    }

    /// Lists directory `dir` from after `after`: the next visible child, stepping over hidden
    /// ones (counted in `hidden`).
    pub(crate) fn next_child(
        &self,
        cursor: &mut Cursor,
        after: Option<&Position>,
        hidden: &mut u64,
    ) -> Result<Option<(Position, Kind)>> {
        let mut after = after.cloned();
        loop {
            let target = match &after {
                Some(p) => path::seek_past(&cursor.prefix, p),
                None => cursor.prefix.clone(),
            };
            let from_data = step(&mut cursor.data, &cursor.prefix, &target)?;
            let from_meta = match &mut cursor.meta {
                Some(it) => step(it, &cursor.prefix, &target)?,
                None => None,
            };
            // Where the child is, and whether the data column family has a key there.
            let (pos, in_data, meta_value) = match (from_data, from_meta) {
                (None, None) => return Ok(None),
                (Some(d), None) => (d.0, true, None),
                (None, Some(m)) => (m.0, false, Some(m.1)),
                (Some(d), Some(m)) => match path::cmp_positions(&d.0, &m.0) {
                    std::cmp::Ordering::Greater => (m.0, false, Some(m.1)),
                    std::cmp::Ordering::Equal => (d.0, true, Some(m.1)),
                    std::cmp::Ordering::Less => (d.0, true, None),
                },
            };
            after = Some(pos.clone());
            if !path::name_is_visible(pos.name()) {
                *hidden += 1;
                continue;
            }
            let key: Vec<u8> = [&cursor.prefix[..], pos.name()].concat();
            match &pos {
                Position::Dir(_) => {
                    // A file of the same name shows instead, and hides the keys below it.
                    if self.resolve_leaf(&key)?.is_some() {
                        *hidden += 1;
                        continue;
                    }
                    return Ok(Some((pos, Kind::Dir)));
                }
                Position::Leaf(_) => {
                    if in_data {
                        return Ok(Some((pos, Kind::File)));
                    }
                    let record = meta_value.unwrap_or_default();
                    match Meta::decode(&record) {
                        Ok(m) if !matches!(m.kind, Kind::File | Kind::Dir) => {
                            return Ok(Some((pos, m.kind)));
                        }
                        // A record whose file another face deleted.
                        Ok(_) => continue,
                        Err(source) => {
                            return Err(FsError::BadMeta {
                                key: display(&key),
                                source,
                            });
                        }
                    }
                }
            }
        }
    }

    pub(crate) fn cursor(&self, dir: &[u8]) -> Result<Cursor> {
        let prefix = path::dir_prefix(dir);
        let end = path::subtree_end(dir);
        let lower = Some(prefix.clone());
        Ok(Cursor {
            data: self.iter(&self.data, lower.clone(), end.clone(), true)?,
            meta: if self.has_meta_cf() {
                Some(self.iter(&self.meta, lower, end, false)?)
            } else {
                None
            },
            prefix,
        })
    }
}

/// Iterators over one directory's children in both column families.
#[derive(Debug)]
pub(crate) struct Cursor {
    prefix: Vec<u8>,
    data: DbIterator,
    meta: Option<DbIterator>,
}

/// The child position at or after `target` in one column family, with the key's value (the
/// metadata record when it is that column family).
fn step(it: &mut DbIterator, prefix: &[u8], target: &[u8]) -> Result<Option<(Position, Vec<u8>)>> {
    it.seek(target);
    while it.valid() && it.key().starts_with(prefix) {
        if let Some(pos) = path::position_of(prefix, it.key()) {
            return Ok(Some((pos, it.value().to_vec())));
        }
        // The directory's own marker or record.
        it.next();
    }
    it.status()?;
    Ok(None)
}
