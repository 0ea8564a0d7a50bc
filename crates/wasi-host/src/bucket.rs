//! A `wasi:keyvalue` bucket of the component, driven from the host: what a component importing
//! `wasi:keyvalue` gets when composed with Strata. A bucket is a column family (`"default"` or
//! `""` the default one); keys are strings stored as their UTF-8 bytes.

use wasmtime::component::ResourceAny;

use crate::WasiDb;
use crate::bindings::exports::wasi::keyvalue::store as kv;
use crate::error::{Error, Result};
use crate::runtime::Instance;

/// One page of [`Bucket::list_keys`]; pass `cursor` back for the next, `None` when done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPage {
    pub keys: Vec<String>,
    pub cursor: Option<u64>,
}

/// A key and its value, as `get-many` answers for a key that is there.
pub type KeyValue = (String, Vec<u8>);

/// An open bucket; released when dropped.
pub struct Bucket<'a> {
    db: &'a WasiDb,
    name: String,
    resource: ResourceAny,
}

impl std::fmt::Debug for Bucket<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bucket").field("name", &self.name).finish()
    }
}

/// The one place the keyvalue error variant becomes the host's.
fn from_keyvalue(bucket: &str) -> impl FnOnce(kv::Error) -> Error + '_ {
    move |e| match e {
        kv::Error::NoSuchStore => Error::NoSuchBucket(bucket.to_string()),
        kv::Error::AccessDenied => Error::Other(format!("access to bucket {bucket:?} denied")),
        kv::Error::Other(s) => Error::Other(s),
    }
}

impl WasiDb {
    /// Opens the `wasi:keyvalue` bucket `name` through the component's export.
    pub fn bucket(&self, name: &str) -> Result<Bucket<'_>> {
        let resource = self.with_instance(|instance, _| {
            instance.call_export(
                |s, b| b.wasi_keyvalue_store().call_open(s, name),
                from_keyvalue(name),
            )
        })?;
        Ok(Bucket {
            db: self,
            name: name.to_string(),
            resource,
        })
    }
}

impl Bucket<'_> {
    pub fn name(&self) -> &str {
        &self.name
    }

    fn call<T>(
        &self,
        f: impl FnOnce(
            &mut wasmtime::Store<crate::runtime::HostState>,
            &crate::bindings::Engine,
            ResourceAny,
        ) -> wasmtime::Result<std::result::Result<T, kv::Error>>,
    ) -> Result<T> {
        let bucket = self.resource;
        self.db.with_instance(|instance: &mut Instance, _| {
            instance.call_export(|s, b| f(s, b, bucket), from_keyvalue(&self.name))
        })
    }

    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.call(|s, b, r| b.wasi_keyvalue_store().bucket().call_get(s, r, key))
    }

    pub fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        self.call(|s, b, r| b.wasi_keyvalue_store().bucket().call_set(s, r, key, value))?;
        self.db.wrote();
        Ok(())
    }

    pub fn delete(&self, key: &str) -> Result<()> {
        self.call(|s, b, r| b.wasi_keyvalue_store().bucket().call_delete(s, r, key))?;
        self.db.wrote();
        Ok(())
    }

    pub fn exists(&self, key: &str) -> Result<bool> {
        self.call(|s, b, r| b.wasi_keyvalue_store().bucket().call_exists(s, r, key))
    }

    /// A page of keys in order, from the start (`None`) or from a cursor a page returned.
    pub fn list_keys(&self, cursor: Option<u64>) -> Result<KeyPage> {
        let page = self.call(|s, b, r| {
            b.wasi_keyvalue_store()
                .bucket()
                .call_list_keys(s, r, cursor)
        })?;
        Ok(KeyPage {
            keys: page.keys,
            cursor: page.cursor,
        })
    }

    /// Values of `keys` in the order asked, read at one snapshot.
    pub fn get_many(&self, keys: &[String]) -> Result<Vec<Option<KeyValue>>> {
        self.call(|s, b, r| b.wasi_keyvalue_batch().call_get_many(s, r, keys))
    }

    /// Sets every pair in one atomic batch.
    pub fn set_many(&self, pairs: &[KeyValue]) -> Result<()> {
        self.call(|s, b, r| b.wasi_keyvalue_batch().call_set_many(s, r, pairs))?;
        self.db.wrote();
        Ok(())
    }

    /// Deletes every key in one atomic batch.
    pub fn delete_many(&self, keys: &[String]) -> Result<()> {
        self.call(|s, b, r| b.wasi_keyvalue_batch().call_delete_many(s, r, keys))?;
        self.db.wrote();
        Ok(())
    }

    /// Adds `delta` to the decimal counter at `key` (absent is 0); the new value.
    pub fn increment(&self, key: &str, delta: u64) -> Result<u64> {
        let v = self.call(|s, b, r| b.wasi_keyvalue_atomics().call_increment(s, r, key, delta))?;
        self.db.wrote();
        Ok(v)
    }
}

impl Drop for Bucket<'_> {
    fn drop(&mut self) {
        // A closed or stopped instance has released it already.
        let _ = self.db.drop_resource(self.resource);
    }
}
