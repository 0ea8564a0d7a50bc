//! The memory-speed reference: a `BTreeMap` behind one lock, keeping nothing on disk. What an
//! engine does beyond this (a WAL, a memtable, versions, a cache, checksums) is what it costs.

use std::collections::BTreeMap;

use parking_lot::RwLock;

use super::engine::DiskWrites;
use super::{BenchArgs, BenchEngine};

type Map = BTreeMap<Box<[u8]>, Box<[u8]>>;

#[derive(Default)]
pub struct MemoryEngine {
    map: RwLock<Map>,
}

impl MemoryEngine {
    pub fn open(args: &BenchArgs) -> Result<Self, String> {
        if args.sync {
            return Err("--sync: the memory engine keeps nothing on disk".into());
        }
        Ok(MemoryEngine::default())
    }
}

impl BenchEngine for MemoryEngine {
    fn name(&self) -> String {
        "memory (a BTreeMap behind a lock, no durability)".into()
    }

    fn write(&self, entries: &[(Vec<u8>, &[u8])]) -> Result<(), String> {
        let mut map = self.map.write();
        for (k, v) in entries {
            map.insert(k.as_slice().into(), (*v).into());
        }
        Ok(())
    }

    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<(), String> {
        if start >= end {
            return Ok(());
        }
        let mut map = self.map.write();
        let doomed: Vec<Box<[u8]>> = map
            .range::<[u8], _>((
                std::ops::Bound::Included(start),
                std::ops::Bound::Excluded(end),
            ))
            .map(|(k, _)| k.clone())
            .collect();
        for k in doomed {
            map.remove(&k);
        }
        Ok(())
    }

    fn delete(&self, keys: &[Vec<u8>]) -> Result<(), String> {
        let mut map = self.map.write();
        for k in keys {
            map.remove(k.as_slice());
        }
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<Option<usize>, String> {
        Ok(self.map.read().get(key).map(|v| v.len()))
    }

    /// Every key under one read lock: the batch's only saving a map can have.
    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<usize>>, String> {
        let map = self.map.read();
        Ok(keys
            .iter()
            .map(|k| map.get(k.as_slice()).map(|v| v.len()))
            .collect())
    }

    fn seek_random(&self, n: u64, next_key: &mut dyn FnMut() -> Vec<u8>) -> Result<u64, String> {
        let mut found = 0;
        for _ in 0..n {
            let key = next_key();
            let map = self.map.read();
            found += map
                .range::<[u8], _>((
                    std::ops::Bound::Included(key.as_slice()),
                    std::ops::Bound::Unbounded,
                ))
                .next()
                .is_some() as u64;
        }
        Ok(found)
    }

    fn scan(&self) -> Result<(u64, u64), String> {
        let map = self.map.read();
        let bytes = map.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
        Ok((map.len() as u64, bytes))
    }

    fn flush(&self) -> Result<(), String> {
        Ok(())
    }

    fn compact(&self) -> Result<(), String> {
        Ok(())
    }

    fn wait_for_compaction(&self) -> Result<(), String> {
        Ok(())
    }

    /// Nothing goes to disk.
    fn disk_bytes_written(&self) -> Option<DiskWrites> {
        Some(DiskWrites::default())
    }

    fn stats(&self) -> String {
        let map = self.map.read();
        format!("{} entries in memory", map.len())
    }

    fn close(&self) -> Result<(), String> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The reference answers as an engine does: deletes, ranges, seeks and batches.
    #[test]
    fn the_map_answers_as_an_engine_does() {
        let engine = MemoryEngine::default();
        let value = [3u8; 7];
        let keys: Vec<Vec<u8>> = (0..20u32).map(|i| format!("{i:04}").into_bytes()).collect();
        let entries: Vec<(Vec<u8>, &[u8])> = keys.iter().map(|k| (k.clone(), &value[..])).collect();
        engine.write(&entries).unwrap();
        engine.delete(&keys[..2]).unwrap();
        engine.delete_range(&keys[5], &keys[8]).unwrap();
        engine.delete_range(&keys[9], &keys[9]).unwrap();
        let found = engine.multi_get(&keys[0..10]).unwrap();
        let present: Vec<bool> = found.iter().map(Option::is_some).collect();
        assert_eq!(
            present,
            [
                false, false, true, true, true, false, false, false, true, true
            ]
        );
        assert_eq!(engine.get(&keys[19]).unwrap(), Some(7));
        assert_eq!(engine.scan().unwrap(), (15, 15 * 11));
        let mut probes = vec![keys[5].clone(), b"9".to_vec()].into_iter();
        assert_eq!(
            engine
                .seek_random(2, &mut || probes.next().unwrap())
                .unwrap(),
            1
        );
    }
}
