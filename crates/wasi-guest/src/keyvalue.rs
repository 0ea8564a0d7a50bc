//! `wasi:keyvalue` 0.2.0-draft (store, batch, atomics) over the store in [`DIR`]. A bucket is a
//! column family: `""` and `"default"` name the default one, any other identifier a column
//! family that must exist (created by any face: `strata cf create`, the REST API).
//!
//! - Keys are strings stored as their UTF-8 bytes, so every face sees the same key; a key that is
//!   not UTF-8 (written by another face) is skipped by `list-keys` and cannot be named here.
//! - Writes are not synced (as `strata:kv`'s `put` without `sync`): they survive the guest or host
//!   process dying, not a power loss.
//! - `set-many` and `delete-many` are one atomic batch each.
//! - A counter is its decimal text (`"42"`), as wasmtime's in-memory keyvalue stores it, so it
//!   reads the same through the mount, the CLI and REST. `increment` is atomic: the instance runs
//!   one call at a time and owns the store.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};

use strata_engine::{ColumnFamily, Db, Options, ReadOptions, WriteBatch};

use crate::exports::wasi::keyvalue::{atomics, batch, store as kv};
use crate::open_stores;

/// Where the store lives in the guest: the host's `WasiDb` preopens the store's directory here,
/// and with plain `wasmtime run`, `--dir DATA::/store` does.
const DIR: &str = "/store";
/// Keys one `list-keys` page holds.
const PAGE: usize = 1000;
/// Listings a bucket keeps resumable; the oldest is forgotten past this.
const CURSORS: usize = 64;

thread_local! {
    /// The store when `wasi:keyvalue` opened it itself (nobody had through `strata:kv`).
    static OWNED: RefCell<Option<Rc<Db>>> = const { RefCell::new(None) };
}

type Result<T> = std::result::Result<T, kv::Error>;

/// The one place engine errors become the keyvalue variant, which has no kinds of its own.
fn error(e: strata_engine::Error) -> kv::Error {
    kv::Error::Other(e.to_string())
}

fn shared_store() -> Result<Rc<Db>> {
    if let Some(db) = open_stores::find(DIR) {
        return Ok(db);
    }
    let opts = Options {
        create_if_missing: true,
        ..Options::default()
    };
    let db = Rc::new(Db::open(DIR, opts).map_err(error)?);
    open_stores::register(DIR, &db);
    OWNED.with(|owned| *owned.borrow_mut() = Some(db.clone()));
    Ok(db)
}

pub struct Bucket {
    /// Weak: closing the store through `strata:kv` closes it for the buckets too.
    db: Weak<Db>,
    cf: ColumnFamily,
    cursors: RefCell<Cursors>,
}

/// Resumable listings: a cursor names the last key a page returned.
#[derive(Default)]
struct Cursors {
    next_id: u64,
    after: BTreeMap<u64, Vec<u8>>,
}

impl Cursors {
    fn issue(&mut self, last_key: Vec<u8>) -> u64 {
        self.next_id += 1;
        self.after.insert(self.next_id, last_key);
        while self.after.len() > CURSORS {
            self.after.pop_first();
        }
        self.next_id
    }
}

impl Bucket {
    fn db(&self) -> Result<Rc<Db>> {
        self.db
            .upgrade()
            .ok_or_else(|| kv::Error::Other("the store was closed".into()))
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let v = self.db()?.get_cf(&self.cf, key).map_err(error)?;
        Ok(v.map(|v| v.to_vec()))
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<()> {
        self.db()?.put_cf(&self.cf, key, value).map_err(error)
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.db()?
            .write(batch, &strata_engine::WriteOptions::default())
            .map_err(error)
    }
}

impl kv::Guest for crate::Component {
    type Bucket = Bucket;

    fn open(identifier: String) -> Result<kv::Bucket> {
        let db = shared_store()?;
        let cf = match identifier.as_str() {
            "" | "default" => db.default_cf(),
            name => db.cf(name).map_err(|_| kv::Error::NoSuchStore)?,
        };
        Ok(kv::Bucket::new(Bucket {
            db: Rc::downgrade(&db),
            cf,
            cursors: RefCell::default(),
        }))
    }
}

impl kv::GuestBucket for Bucket {
    fn get(&self, key: String) -> Result<Option<Vec<u8>>> {
        Bucket::get(self, &key)
    }

    fn set(&self, key: String, value: Vec<u8>) -> Result<()> {
        self.put(&key, &value)
    }

    fn delete(&self, key: String) -> Result<()> {
        self.db()?.delete_cf(&self.cf, key).map_err(error)
    }

    fn exists(&self, key: String) -> Result<bool> {
        // The value's size is known without reading a blob file.
        let size = self.db()?.value_size_cf(&self.cf, key).map_err(error)?;
        Ok(size.is_some())
    }

    fn list_keys(&self, cursor: Option<u64>) -> Result<kv::KeyResponse> {
        let after = match cursor {
            None => None,
            Some(id) => Some(self.cursors.borrow_mut().after.remove(&id).ok_or_else(|| {
                kv::Error::Other(format!(
                    "cursor {id} is unknown or expired; list again without a cursor"
                ))
            })?),
        };
        let lower_bound = after.map(|mut k| {
            k.push(0); // the smallest key after the last one listed
            k
        });
        let opts = ReadOptions {
            lower_bound,
            keys_only: true,
            ..ReadOptions::default()
        };
        let db = self.db()?;
        let mut it = db.iter_cf(&opts, &self.cf).map_err(error)?;
        it.seek_to_first();
        let mut keys = Vec::new();
        let mut last = None;
        while it.valid() && keys.len() < PAGE {
            if let Ok(k) = std::str::from_utf8(it.key()) {
                keys.push(k.to_string());
            }
            last = Some(it.key().to_vec());
            it.next();
        }
        it.status().map_err(error)?;
        let cursor = match last {
            Some(last) if it.valid() => Some(self.cursors.borrow_mut().issue(last)),
            _ => None,
        };
        Ok(kv::KeyResponse { keys, cursor })
    }
}

impl batch::Guest for crate::Component {
    fn get_many(
        bucket: kv::BucketBorrow<'_>,
        keys: Vec<String>,
    ) -> Result<Vec<Option<(String, Vec<u8>)>>> {
        let b = bucket.get::<Bucket>();
        let db = b.db()?;
        let lookups: Vec<(&ColumnFamily, &[u8])> =
            keys.iter().map(|k| (&b.cf, k.as_bytes())).collect();
        let found = db.multi_get_cf(&ReadOptions::default(), &lookups);
        keys.into_iter()
            .zip(found)
            .map(|(k, v)| Ok(v.map_err(error)?.map(|v| (k, v.to_vec()))))
            .collect()
    }

    fn set_many(bucket: kv::BucketBorrow<'_>, key_values: Vec<(String, Vec<u8>)>) -> Result<()> {
        let b = bucket.get::<Bucket>();
        let mut batch = WriteBatch::new();
        for (k, v) in key_values {
            batch.put_cf(&b.cf, k, v);
        }
        b.write(batch)
    }

    fn delete_many(bucket: kv::BucketBorrow<'_>, keys: Vec<String>) -> Result<()> {
        let b = bucket.get::<Bucket>();
        let mut batch = WriteBatch::new();
        for k in keys {
            batch.delete_cf(&b.cf, k);
        }
        b.write(batch)
    }
}

impl atomics::Guest for crate::Component {
    fn increment(bucket: kv::BucketBorrow<'_>, key: String, delta: u64) -> Result<u64> {
        let b = bucket.get::<Bucket>();
        let current = match b.get(&key)? {
            None => 0,
            Some(v) => std::str::from_utf8(&v)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| {
                    kv::Error::Other(format!("the value of {key:?} is not a decimal u64 counter"))
                })?,
        };
        let next = current
            .checked_add(delta)
            .ok_or_else(|| kv::Error::Other(format!("incrementing {key:?} overflows u64")))?;
        b.put(&key, next.to_string().as_bytes())?;
        Ok(next)
    }
}
