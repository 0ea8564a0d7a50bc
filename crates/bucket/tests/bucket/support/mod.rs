//! What the tests share: SeaweedFS, and opening a store on a bucket.

pub mod seaweed;

use std::sync::Arc;

use strata_bucket::BucketFs;
use strata_engine::{Db, Options, WriteOptions};

pub fn open_db(fs: BucketFs) -> Db {
    let root = fs.root().to_path_buf();
    let opts = Options {
        create_if_missing: true,
        filesystem: Arc::new(fs),
        ..Options::default()
    };
    Db::open(&root, opts).unwrap()
}

pub fn synced() -> WriteOptions {
    WriteOptions {
        sync: true,
        ..WriteOptions::default()
    }
}

pub fn get(db: &Db, key: &str) -> Option<Vec<u8>> {
    db.get(key.as_bytes()).unwrap().map(|v| v.to_vec())
}
