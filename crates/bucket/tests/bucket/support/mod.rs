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

/// `len` bytes no compressor shrinks, the same for the same seed (xorshift).
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
