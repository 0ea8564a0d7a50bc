//! Entry points for the cargo-fuzz targets in `fuzz/`: each feeds arbitrary bytes to one decoder
//! and walks everything it yields. Any panic (or sanitizer report) is a bug; errors are the
//! expected answer to garbage. Not part of the API.

use std::path::Path;
use std::sync::Arc;

use crate::blob::reader::BlobFileReader;
use crate::block::Block;
use crate::db::WriteBatch;
use crate::error::Result;
use crate::fs::RandomAccessFile;
use crate::iter::InternalIterator;
use crate::sst::{BlockReadOptions, MetaBlocks, TableReader};
use crate::stats::Stats;
use crate::version::VersionEdit;
use crate::wal::{LogReader, ReadOutcome};

/// A file held in memory.
#[derive(Debug)]
struct MemFile(Vec<u8>);

impl RandomAccessFile for MemFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        match start
            .checked_add(buf.len())
            .and_then(|end| self.0.get(start..end))
        {
            Some(bytes) => {
                buf.copy_from_slice(bytes);
                Ok(())
            }
            None => Err(crate::Error::io(
                "read past the end",
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            )),
        }
    }

    fn len(&self) -> Result<u64> {
        Ok(self.0.len() as u64)
    }
}

/// Walks every entry both ways, then seeks to `probe` (a user key; iterators take internal keys).
fn walk(it: &mut dyn InternalIterator, probe: &[u8]) {
    let probe = crate::key::lookup_key(probe, u64::MAX >> 8);
    it.seek_to_first();
    let mut n = 0;
    while it.valid() && n < 100_000 {
        let _ = (it.key().len(), it.value().len());
        it.next();
        n += 1;
    }
    it.seek_to_last();
    while it.valid() && n < 200_000 {
        it.prev();
        n += 1;
    }
    it.seek(&probe);
    if it.valid() {
        it.next();
    }
    let _ = it.status();
}

/// A data, index or metaindex block.
pub fn block(data: &[u8]) {
    if let Ok(block) = Block::new(data.to_vec(), Path::new("fuzz.sst")) {
        let probe = data.get(..data.len().min(12)).unwrap_or_default();
        walk(&mut Arc::new(block).iter(), probe);
    }
}

/// A whole table file.
pub fn table(data: &[u8]) {
    let file = Arc::new(MemFile(data.to_vec()));
    let stats = Arc::new(Stats::default());
    let Ok(table) = TableReader::open(
        file,
        Path::new("fuzz.sst"),
        1,
        None,
        MetaBlocks::Held,
        stats,
    ) else {
        return;
    };
    let table = Arc::new(table);
    let _ = table.verify();
    let opts = BlockReadOptions::ONE_PASS;
    if let Ok(mut it) = table.iter(opts) {
        walk(&mut it, b"key");
    }
}

/// A WAL: every record in both recovery modes, each decoded as a write batch.
pub fn wal(data: &[u8]) {
    for mode in [ReadOutcome::FailOnMidLogDamage, ReadOutcome::SkipDamage] {
        let mut reader = LogReader::new(data, Path::new("fuzz.log"), mode);
        while let Ok(Some(record)) = reader.next_record() {
            if let Some(batch) = WriteBatch::from_bytes(record) {
                let _ = batch.for_each(|r| {
                    let _ = (r.key.len(), r.value.len());
                });
            }
        }
    }
    if let Some(batch) = WriteBatch::from_bytes(data.to_vec()) {
        let _ = batch.for_each(|_| {});
    }
}

/// A MANIFEST: every record decoded as a version edit, and the bytes as one edit.
pub fn manifest(data: &[u8]) {
    let path = Path::new("MANIFEST-000001");
    let mut reader = LogReader::new(data, path, ReadOutcome::FailOnMidLogDamage);
    while let Ok(Some(record)) = reader.next_record() {
        let _ = VersionEdit::decode(&record, path);
    }
    let _ = VersionEdit::decode(data, path);
}

/// A blob file: header, footer or scan, every record, and the bytes as a blob index.
pub fn blob(data: &[u8]) {
    let _ = crate::blob::BlobIndex::decode(data);
    let reader =
        BlobFileReader::from_file(Path::new("fuzz.blob"), Arc::new(MemFile(data.to_vec())));
    if let Ok(found) = reader.recover() {
        let _ = reader.for_each_record(found.file_size, |_, _, r| {
            let _ = crate::blob::reader::decode_value(r);
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::field_reassign_with_default)]

    use super::*;
    use crate::{Db, Options};

    /// The fuzz entry points on stable: real files of every kind, truncated at every length and
    /// with each byte flipped, must decode to errors or data, never a panic.
    #[test]
    fn entry_points_survive_damaged_real_files() {
        let dir = crate::test_dir::tempdir();
        let mut o = Options::default();
        o.enable_blob_files = true;
        o.min_blob_size = 20;
        o.block_size = 256;
        let db = Db::open(dir.path(), o).unwrap();
        for i in 0..60u32 {
            db.put(
                format!("key{i:03}"),
                format!("value-{i:03}-{}", "v".repeat(i as usize % 30)),
            )
            .unwrap();
        }
        db.delete_range("key010", "key020").unwrap();
        db.flush().unwrap();
        db.put("after", "flush").unwrap();
        drop(db);
        let mut runs = 0;
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let target: fn(&[u8]) = match () {
                _ if name.ends_with(".sst") => table,
                _ if name.ends_with(".log") => wal,
                _ if name.ends_with(".blob") => blob,
                _ if name.starts_with("MANIFEST") => manifest,
                _ => continue,
            };
            let good = std::fs::read(&path).unwrap();
            for len in 0..good.len().min(600) {
                target(&good[..len]);
                block(&good[..len]);
                runs += 2;
            }
            for i in 0..good.len().min(600) {
                let mut bad = good.clone();
                bad[i] ^= 0x41;
                target(&bad);
                runs += 1;
            }
        }
        assert!(runs > 2000, "only {runs} inputs");
    }
}
