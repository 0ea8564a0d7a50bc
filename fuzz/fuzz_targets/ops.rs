//! Arbitrary bytes as a sequence of operations on a store with tiny buffers, checked against a
//! `BTreeMap`: every get, ranged read and scan must agree, across flushes, compactions and
//! reopens. Partial writes (append, write at an offset, truncate) and copies and renames are
//! checked against the same map; values grow past the plain-value limit into extent lists.
#![no_main]

use std::collections::BTreeMap;

use strata_engine::{Db, ErrorKind, Options, ReadOptions, WriteBatch, WriteOptions};

fn options() -> Options {
    let mut o = Options::default();
    o.write_buffer_size = 4 << 10;
    o.target_file_size_base = 4 << 10;
    o.max_bytes_for_level_base = 16 << 10;
    o.level0_file_num_compaction_trigger = 2;
    o.enable_blob_files = true;
    o.min_blob_size = 24;
    o.blob_file_size = 4 << 10;
    o
}

fn key(b: u8) -> Vec<u8> {
    format!("k{:03}", b % 64).into_bytes()
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Db::open(dir.path(), options()).unwrap();
    let mut model = BTreeMap::<Vec<u8>, Vec<u8>>::new();
    let mut ops = data.chunks_exact(3);
    for (i, op) in ops.by_ref().enumerate().take(400) {
        let (a, b) = (key(op[1]), key(op[2]));
        let mut batch = WriteBatch::new();
        match op[0] % 14 {
            0..=3 => {
                let v = vec![op[2]; usize::from(op[2] % 48) + i % 3];
                db.put(&a, &v).unwrap();
                model.insert(a, v);
            }
            4 => {
                db.delete(&a).unwrap();
                model.remove(&a);
            }
            5 => {
                let (lo, hi) = if a < b { (a, b) } else { (b, a) };
                if lo < hi {
                    db.delete_range(&lo, &hi).unwrap();
                    model.retain(|k, _| *k < lo || *k >= hi);
                }
            }
            6 => {
                let got = db.get(&a).unwrap().map(|v| v.into_vec());
                assert_eq!(got.as_ref(), model.get(&a), "get {a:?}");
                // The same value by range, from an offset and length the input chooses.
                let (offset, len) = (u64::from(op[2]) * 41, u64::from(op[1]) * 13);
                let part = db.read_range(&a, offset, len).unwrap();
                let want = model.get(&a).map(|v| {
                    let start = (offset as usize).min(v.len());
                    let end = ((offset + len) as usize).min(v.len());
                    (v.len() as u64, v[start..end].to_vec())
                });
                let got = part.map(|r| (r.value_len, r.bytes.into_vec()));
                assert_eq!(got, want, "read_range {a:?} {len} at {offset}");
            }
            10 => {
                // Up to 10 KiB: values cross 4 KiB and become extent lists.
                let v = vec![op[2]; usize::from(op[2]) * 40 + 1];
                batch.append(&a, &v);
                db.write(batch, &WriteOptions::default()).unwrap();
                model.entry(a).or_default().extend_from_slice(&v);
            }
            11 | 12 => {
                let offset = usize::from(op[2]) * 37;
                let v = vec![op[1]; usize::from(op[1] % 16) * 300 + 1];
                let r = match op[0] % 14 {
                    11 => {
                        batch.write_at(&a, offset as u64, &v);
                        db.write(batch, &WriteOptions::default())
                    }
                    _ => {
                        batch.truncate(&a, offset as u64);
                        db.write(batch, &WriteOptions::default())
                    }
                };
                match model.get_mut(&a) {
                    None => assert_eq!(r.unwrap_err().kind(), ErrorKind::NotFound),
                    Some(cur) => {
                        r.unwrap();
                        if op[0] % 14 == 11 {
                            if cur.len() < offset + v.len() {
                                cur.resize(offset + v.len(), 0);
                            }
                            cur[offset..offset + v.len()].copy_from_slice(&v);
                        } else {
                            cur.resize(offset, 0);
                        }
                    }
                }
            }
            13 => {
                let rename = op[1] % 2 == 0;
                if rename {
                    batch.rename(&a, &b);
                } else {
                    batch.copy(&a, &b);
                }
                let r = db.write(batch, &WriteOptions::default());
                match model.get(&a).cloned() {
                    _ if a == b => assert_eq!(r.unwrap_err().kind(), ErrorKind::InvalidArgument),
                    None => assert_eq!(r.unwrap_err().kind(), ErrorKind::NotFound),
                    Some(v) => {
                        r.unwrap();
                        if rename {
                            model.remove(&a);
                        }
                        model.insert(b, v);
                    }
                }
            }
            7 => db.flush().unwrap(),
            8 => db.compact_range(None, None).unwrap(),
            _ => {
                drop(db);
                db = Db::open(dir.path(), options()).unwrap();
            }
        }
    }
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    let mut got = Vec::new();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    let want: Vec<_> = model.into_iter().collect();
    assert_eq!(got, want);
});
