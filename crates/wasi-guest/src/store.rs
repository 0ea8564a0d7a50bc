//! `strata:kv/store`: each call on the native `Db`, errors mapped in one place ([`error`]).

use std::cell::RefCell;
use std::rc::Rc;

use strata_engine::{
    Clock, Compression, Db, DbIterator, ErrorKind, Options, ReadOptions, Snapshot, WriteBatch,
    WriteOptions,
};

use crate::exports::strata::kv::store as wit;
use crate::open_stores;

/// The one place engine errors become the WIT variant.
fn error(e: strata_engine::Error) -> wit::Error {
    let text = e.to_string();
    match e.kind() {
        ErrorKind::Corruption => wit::Error::Corruption(text),
        ErrorKind::InvalidArgument => wit::Error::InvalidArgument(text),
        ErrorKind::Io | ErrorKind::NoSpace => wit::Error::Io(text),
        ErrorKind::Busy => wit::Error::Busy(text),
        ErrorKind::Closed => wit::Error::Closed,
        ErrorKind::NotFound => wit::Error::NotFound(text),
        _ => wit::Error::Other(text),
    }
}

type Result<T> = std::result::Result<T, wit::Error>;

impl wit::Guest for crate::Component {
    type Db = Store;
    type Snapshot = View;
    type Scan = Walk;
}

pub struct Store {
    db: RefCell<Option<Rc<Db>>>,
}

impl Store {
    fn with<T>(&self, f: impl FnOnce(&Db) -> strata_engine::Result<T>) -> Result<T> {
        match &*self.db.borrow() {
            Some(db) => f(db).map_err(error),
            None => Err(wit::Error::Closed),
        }
    }

    /// A batch of the one operation `fill` adds, written.
    fn one(&self, sync: bool, fill: impl FnOnce(&mut WriteBatch)) -> Result<()> {
        let mut batch = WriteBatch::new();
        fill(&mut batch);
        self.with(|db| db.write(batch, &write_options(sync)))
    }
}

fn write_options(sync: bool) -> WriteOptions {
    WriteOptions {
        sync,
        ..WriteOptions::default()
    }
}

fn read_options(at: Option<wit::SnapshotBorrow<'_>>) -> ReadOptions {
    ReadOptions {
        snapshot: at.map(|s| s.get::<View>().snapshot.clone()),
        ..ReadOptions::default()
    }
}

impl wit::GuestDb for Store {
    fn open(path: String, o: wit::OpenOptions) -> Result<wit::Db> {
        let mut opts = Options {
            create_if_missing: o.create_if_missing,
            cache_size: usize::try_from(o.cache_size)
                .map_err(|_| wit::Error::InvalidArgument("cache-size is too large".into()))?,
            ..Options::default()
        };
        opts.cf.compression = match o.compression {
            wit::Compression::None => Compression::None,
            wit::Compression::Zstd => Compression::Zstd,
        };
        opts.cf.bloom_bits_per_key = o.bloom_bits_per_key;
        opts.cf.write_buffer_size = usize::try_from(o.write_buffer_size)
            .map_err(|_| wit::Error::InvalidArgument("write-buffer-size is too large".into()))?;
        opts.cf.enable_blob_files = o.enable_blob_files;
        opts.cf.min_blob_size = usize::try_from(o.min_blob_size)
            .map_err(|_| wit::Error::InvalidArgument("min-blob-size is too large".into()))?;
        if o.blob_ttl_range_secs > 0 {
            opts.cf.ttl_range_secs = o.blob_ttl_range_secs;
        }
        if open_stores::is_open(&path) {
            return Err(wit::Error::Busy(format!(
                "{path} is already open in this instance"
            )));
        }
        let db = Rc::new(Db::open(&path, opts).map_err(error)?);
        open_stores::register(&path, &db);
        Ok(wit::Db::new(Store {
            db: RefCell::new(Some(db)),
        }))
    }

    fn get(&self, key: Vec<u8>, at: Option<wit::SnapshotBorrow<'_>>) -> Result<Option<Vec<u8>>> {
        let opts = read_options(at);
        self.with(|db| Ok(db.get_with(&opts, &key)?.map(|v| v.to_vec())))
    }

    fn read_range(
        &self,
        key: Vec<u8>,
        offset: u64,
        len: u64,
        at: Option<wit::SnapshotBorrow<'_>>,
    ) -> Result<Option<wit::ValueRange>> {
        let opts = read_options(at);
        self.with(|db| {
            let range = db.read_range_cf(&opts, &db.default_cf(), &key, offset, len)?;
            Ok(range.map(|r| wit::ValueRange {
                value_len: r.value_len,
                bytes: r.bytes.into_vec(),
            }))
        })
    }

    fn length(&self, key: Vec<u8>) -> Result<Option<u64>> {
        self.with(|db| db.value_size_cf(&db.default_cf(), &key))
    }

    fn sync_wal(&self) -> Result<()> {
        self.with(|db| db.sync_wal())
    }

    fn multi_get(
        &self,
        keys: Vec<Vec<u8>>,
        at: Option<wit::SnapshotBorrow<'_>>,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let opts = read_options(at);
        self.with(|db| {
            db.multi_get(&opts, &keys)
                .into_iter()
                .map(|r| r.map(|v| v.map(|v| v.to_vec())))
                .collect()
        })
    }

    fn put(&self, key: Vec<u8>, value: Vec<u8>, sync: bool) -> Result<()> {
        self.with(|db| db.put_with(&write_options(sync), key, value))
    }

    fn put_with_ttl(&self, key: Vec<u8>, value: Vec<u8>, ttl_secs: u64, sync: bool) -> Result<()> {
        let mut batch = WriteBatch::new();
        let now = strata_engine::SystemClock.now_secs();
        batch.put_until(key, value, now.saturating_add(ttl_secs));
        self.with(|db| db.write(batch, &write_options(sync)))
    }

    fn write_at(&self, key: Vec<u8>, offset: u64, data: Vec<u8>, sync: bool) -> Result<()> {
        self.one(sync, |b| b.write_at(key, offset, data))
    }

    fn append(&self, key: Vec<u8>, data: Vec<u8>, sync: bool) -> Result<()> {
        self.one(sync, |b| b.append(key, data))
    }

    fn truncate(&self, key: Vec<u8>, len: u64, sync: bool) -> Result<()> {
        self.one(sync, |b| b.truncate(key, len))
    }

    fn move_(&self, from: Vec<u8>, to: Vec<u8>, sync: bool) -> Result<()> {
        self.one(sync, |b| b.rename(from, to))
    }

    fn copy(&self, from: Vec<u8>, to: Vec<u8>, sync: bool) -> Result<()> {
        self.one(sync, |b| b.copy(from, to))
    }

    fn write_encoded(&self, batch: Vec<u8>, sync: bool) -> Result<()> {
        self.with(|db| db.write(WriteBatch::from_data(batch)?, &write_options(sync)))
    }

    fn delete(&self, key: Vec<u8>, sync: bool) -> Result<()> {
        self.with(|db| db.delete_with(&write_options(sync), key))
    }

    fn delete_range(&self, range: wit::KeyRange, sync: bool) -> Result<()> {
        self.with(|db| db.delete_range_with(&write_options(sync), range.start, range.end))
    }

    fn write(&self, ops: Vec<wit::BatchOp>, sync: bool) -> Result<()> {
        let mut batch = WriteBatch::new();
        for op in ops {
            match op {
                wit::BatchOp::Put(e) => batch.put(e.key, e.value),
                wit::BatchOp::Delete(k) => batch.delete(k),
                wit::BatchOp::DeleteRange(r) => batch.delete_range(r.start, r.end),
            }
        }
        self.with(|db| db.write(batch, &write_options(sync)))
    }

    fn snapshot(&self) -> Result<wit::Snapshot> {
        let snapshot = self.with(|db| Ok(db.snapshot()))?;
        Ok(wit::Snapshot::new(View { snapshot }))
    }

    fn scan(&self, o: wit::ScanOptions, at: Option<wit::SnapshotBorrow<'_>>) -> Result<wit::Scan> {
        let opts = ReadOptions {
            lower_bound: o.start,
            upper_bound: o.end,
            keys_only: o.keys_only,
            ..read_options(at)
        };
        let reverse = o.direction == wit::Direction::Reverse;
        let mut it = self.with(|db| db.iter(&opts))?;
        if reverse {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        Ok(wit::Scan::new(Walk {
            it: RefCell::new(it),
            reverse,
            keys_only: o.keys_only,
        }))
    }

    fn flush(&self) -> Result<()> {
        self.with(Db::flush)
    }

    fn compact_range(&self, start: Option<Vec<u8>>, end: Option<Vec<u8>>) -> Result<()> {
        self.with(|db| db.compact_range(start.as_deref(), end.as_deref()))
    }

    fn maintenance(&self, steps: u32, millis: u32) -> Result<bool> {
        self.with(|db| {
            let began = std::time::Instant::now();
            let budget = std::time::Duration::from_millis(u64::from(millis));
            let mut more = true;
            for _ in 0..steps {
                if began.elapsed() >= budget {
                    break;
                }
                more = db.maintenance_step()?;
                if !more {
                    break;
                }
            }
            Ok(more)
        })
    }

    fn properties(&self) -> Result<wit::Properties> {
        self.with(|db| {
            let p = db.properties();
            let st = db.statistics();
            // The store's properties hold the default column family's, first.
            let default_cf;
            let cf = match p.column_families.first() {
                Some(cf) => cf,
                None => {
                    default_cf = db.properties_cf(&db.default_cf())?;
                    &default_cf
                }
            };
            let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
            Ok(wit::Properties {
                work_pending: cf.immutable_memtables > 0
                    || cf.levels.iter().any(|l| l.score >= 1.0),
                levels: cf
                    .levels
                    .iter()
                    .map(|l| wit::LevelInfo {
                        level: count(l.level),
                        files: count(l.files),
                        bytes: l.bytes,
                        entries: l.entries,
                        deletions: l.deletions,
                        range_deletions: l.range_deletions,
                        score: l.score,
                    })
                    .collect(),
                cache: p.block_cache.as_ref().map(|c| wit::CacheInfo {
                    capacity: c.capacity,
                    usage: c.usage,
                    pinned: c.pinned_usage,
                    hits: st.block_cache_hit,
                    misses: st.block_cache_miss,
                }),
                range_tombstones: cf.total_range_deletions,
                blobs: wit::BlobInfo {
                    files: count(p.blobs.live_blob_files),
                    bytes: p.blobs.blob_file_bytes,
                    live_bytes: p.blobs.blob_live_bytes,
                    garbage_bytes: p.blobs.blob_garbage_bytes,
                    evicted_files: count(p.blobs.evicted_blob_files),
                },
                live_bytes: p.live_bytes,
                last_sequence: p.last_sequence,
                write_amplification: p.write_amplification,
            })
        })
    }

    fn close(&self) -> Result<()> {
        let Some(db) = self.db.borrow_mut().take() else {
            return Ok(());
        };
        // Buckets hold the store weakly and only for the length of a call, so this is the
        // last strong reference.
        match Rc::try_unwrap(db) {
            Ok(db) => db.close().map_err(error),
            Err(_) => Err(wit::Error::Busy("the store is in use".into())),
        }
    }
}

pub struct View {
    snapshot: Snapshot,
}

impl wit::GuestSnapshot for View {
    fn sequence(&self) -> u64 {
        self.snapshot.sequence()
    }
}

pub struct Walk {
    it: RefCell<DbIterator>,
    reverse: bool,
    keys_only: bool,
}

impl wit::GuestScan for Walk {
    fn next_page(&self, max: u32) -> Result<Vec<wit::Entry>> {
        let mut it = self.it.borrow_mut();
        let mut page = Vec::new();
        while it.valid() && page.len() < max as usize {
            page.push(wit::Entry {
                key: it.key().to_vec(),
                value: if self.keys_only {
                    Vec::new()
                } else {
                    it.value().to_vec()
                },
            });
            if self.reverse {
                it.prev();
            } else {
                it.next();
            }
        }
        it.status().map_err(error)?;
        Ok(page)
    }
}
