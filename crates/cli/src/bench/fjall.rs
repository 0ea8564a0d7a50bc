//! fjall 3 (a Rust LSM with its own journal, memtable and leveled compaction) under the same
//! workloads, with the options Strata's flags map to. A flag fjall cannot honour is refused,
//! never dropped: a comparison is only fair if both engines ran with what the command line says.

use std::path::Path;

use fjall::config::{
    BlockSizePolicy, BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry,
    PartitioningPolicy, PinningPolicy,
};
use fjall::{
    CompressionType, Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions, PersistMode,
};

use super::engine::{DiskWrites, column_family_names, key_number};
use super::{BenchArgs, BenchEngine};

/// fjall refuses a smaller journal budget (it asserts).
const MIN_JOURNAL_BYTES: u64 = 64 << 20;

pub struct FjallEngine {
    db: Database,
    /// Key number `n` lives in `keyspaces[n % keyspaces.len()]`, as Strata's column families.
    keyspaces: Vec<Keyspace>,
    durability: PersistMode,
    l0_trigger: usize,
}

fn err(e: fjall::Error) -> String {
    format!("fjall: {e}")
}

/// The keyspace options the flags ask for.
pub fn keyspace_options(args: &BenchArgs) -> Result<KeyspaceCreateOptions, String> {
    if args.compression_type != "none" {
        return Err(format!(
            "--compression_type {}: fjall compresses with lz4 only; compare with none",
            args.compression_type
        ));
    }
    if args.memtable_bloom()?.0 > 0.0 {
        return Err(
            "fjall's memtable has no Bloom filter: compare with --memtablerep skip_list \
                    and no --memtable_bloom_size_ratio"
                .into(),
        );
    }
    if args.disable_auto_compactions {
        return Err("fjall cannot turn automatic compactions off".into());
    }
    if args.ttl > 0 {
        return Err("--ttl is Strata's: fjall has no TTL".into());
    }
    let l0_trigger = u8::try_from(args.level0_file_num_compaction_trigger)
        .map_err(|_| "--level0_file_num_compaction_trigger: fjall takes at most 255")?;
    // fjall sizes its first level as the table size times the L0 trigger, with no flag of its
    // own: anything else would run fjall with a different tree from the one asked for.
    let base = args.target_file_size_base * u64::from(l0_trigger);
    if args.max_bytes_for_level_base != base {
        return Err(format!(
            "fjall sizes its first level as --target_file_size_base times \
             --level0_file_num_compaction_trigger ({base} bytes): set --max_bytes_for_level_base \
             to that"
        ));
    }
    let strategy = fjall::compaction::Leveled::default()
        .with_l0_threshold(l0_trigger)
        .with_table_target_size(args.target_file_size_base)
        .with_level_ratio_policy(vec![args.max_bytes_for_level_multiplier as f32]);
    let filter = match args.bloom_bits {
        0 => FilterPolicyEntry::None,
        bits => FilterPolicyEntry::Bloom(BloomConstructionPolicy::BitsPerKey(bits as f32)),
    };
    // Strata keeps index and filter blocks in each open table unless told to cache them, and
    // then pins L0's only when told to: fjall's pinning policy says the same per level.
    let pinned = if !args.cache_index_and_filter_blocks {
        PinningPolicy::all(true)
    } else if args.pin_l0_filter_and_index_blocks_in_cache {
        PinningPolicy::new([true, false])
    } else {
        PinningPolicy::all(false)
    };
    let block_size = u32::try_from(strata_engine::ColumnFamilyOptions::default().block_size)
        .map_err(|_| "Strata's block size does not fit fjall's")?;
    let mut opts = KeyspaceCreateOptions::default()
        .max_memtable_size(args.write_buffer_size as u64)
        // Strata's block size (it has no flag for it): stated, not left to fjall's default.
        .data_block_size_policy(BlockSizePolicy::all(block_size))
        .data_block_compression_policy(CompressionPolicy::all(CompressionType::None))
        .index_block_compression_policy(CompressionPolicy::all(CompressionType::None))
        .filter_policy(FilterPolicy::all(filter))
        .index_block_pinning_policy(pinned.clone())
        .filter_block_pinning_policy(pinned)
        // Strata's index and filter are one block each per table: no partitions on either side.
        .index_block_partitioning_policy(PartitioningPolicy::all(false))
        .filter_block_partitioning_policy(PartitioningPolicy::all(false))
        .compaction_strategy(std::sync::Arc::new(strategy));
    if args.enable_blob_files {
        let threshold = u32::try_from(args.min_blob_size)
            .map_err(|_| "--min_blob_size: fjall takes at most 4 GiB")?;
        opts = opts.with_kv_separation(Some(
            KvSeparationOptions::default()
                .separation_threshold(threshold)
                .file_target_size(args.blob_file_size)
                .compression(CompressionType::None),
        ));
    }
    Ok(opts)
}

impl FjallEngine {
    pub fn open(dir: &Path, args: &BenchArgs) -> Result<Self, String> {
        if args.disable_wal {
            return Err("fjall always writes its journal: compare with the WAL on".into());
        }
        let opts = keyspace_options(args)?;
        let keyspace_count = args.num_column_families as u64;
        // 0 is Strata's and RocksDB's "four times every memtable's budget".
        let journal = match args.max_total_wal_size {
            0 => (4 * keyspace_count * args.write_buffer_size as u64).max(MIN_JOURNAL_BYTES),
            n if n < MIN_JOURNAL_BYTES => {
                return Err(format!(
                    "--max_total_wal_size: fjall takes at least {MIN_JOURNAL_BYTES} bytes"
                ));
            }
            n => n,
        };
        let db = Database::builder(dir)
            .cache_size(args.cache_size as u64)
            .worker_threads(args.max_background_jobs.max(1))
            .journal_compression(CompressionType::None)
            .max_journaling_size(journal)
            .open()
            .map_err(err)?;
        let mut keyspaces = vec![db.keyspace("default", || opts.clone()).map_err(err)?];
        for name in column_family_names(args) {
            keyspaces.push(db.keyspace(&name, || opts.clone()).map_err(err)?);
        }
        Ok(FjallEngine {
            db,
            keyspaces,
            // fdatasync, as RocksDB's and Strata's synced WAL writes. Unsynced, each write still
            // reaches the OS before it returns, as theirs do (a batch left alone would not: it
            // stays in fjall's buffer, lost with the process).
            durability: if args.sync {
                PersistMode::SyncData
            } else {
                PersistMode::Buffer
            },
            l0_trigger: args.level0_file_num_compaction_trigger,
        })
    }

    fn keyspace_of(&self, key: &[u8]) -> &Keyspace {
        &self.keyspaces[(key_number(key) % self.keyspaces.len() as u64) as usize]
    }

    fn commit(&self, fill: impl FnOnce(&mut fjall::OwnedWriteBatch)) -> Result<(), String> {
        let mut batch = self.db.batch().durability(Some(self.durability));
        fill(&mut batch);
        batch.commit().map_err(err)
    }
}

impl BenchEngine for FjallEngine {
    fn name(&self) -> String {
        "fjall 3 (crate fjall 3.1)".into()
    }

    fn write(&self, entries: &[(Vec<u8>, &[u8])]) -> Result<(), String> {
        // One key without sync takes fjall's own single-write path, which skips the batch and
        // hands the journal to the OS itself.
        if let ([(k, v)], PersistMode::Buffer) = (entries, self.durability) {
            return self.keyspace_of(k).insert(k.as_slice(), *v).map_err(err);
        }
        self.commit(|b| {
            for (k, v) in entries {
                b.insert(self.keyspace_of(k), k.as_slice(), *v);
            }
        })
    }

    fn delete_range(&self, _start: &[u8], _end: &[u8]) -> Result<(), String> {
        Err("fjall has no range deletion: compare with --expand_range_tombstones".into())
    }

    fn delete(&self, keys: &[Vec<u8>]) -> Result<(), String> {
        self.commit(|b| {
            for k in keys {
                b.remove(self.keyspace_of(k), k.as_slice());
            }
        })
    }

    fn get(&self, key: &[u8]) -> Result<Option<usize>, String> {
        Ok(self
            .keyspace_of(key)
            .get(key)
            .map_err(err)?
            .map(|v| v.len()))
    }

    /// fjall has no batched lookup: a loop of gets, as its users write one.
    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<usize>>, String> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    /// fjall's iterators cannot be moved once made: one range iterator per seek.
    fn seek_random(&self, n: u64, next_key: &mut dyn FnMut() -> Vec<u8>) -> Result<u64, String> {
        let mut found = 0;
        for _ in 0..n {
            let key = next_key();
            if let Some(guard) = self.keyspace_of(&key).range(key.as_slice()..).next() {
                guard.key().map_err(err)?;
                found += 1;
            }
        }
        Ok(found)
    }

    fn scan(&self) -> Result<(u64, u64), String> {
        let (mut n, mut bytes) = (0u64, 0u64);
        for keyspace in &self.keyspaces {
            for guard in keyspace.iter() {
                let (k, v) = guard.into_inner().map_err(err)?;
                n += 1;
                bytes += (k.len() + v.len()) as u64;
            }
        }
        Ok((n, bytes))
    }

    fn flush(&self) -> Result<(), String> {
        for keyspace in &self.keyspaces {
            keyspace.rotate_memtable_and_wait().map_err(err)?;
        }
        Ok(())
    }

    fn compact(&self) -> Result<(), String> {
        for keyspace in &self.keyspaces {
            keyspace.major_compact().map_err(err)?;
        }
        Ok(())
    }

    fn wait_for_compaction(&self) -> Result<(), String> {
        // fjall says what runs, not what is due: settled when nothing runs, no memtable waits for
        // a flush and L0 is under its trigger, three polls in a row.
        let mut settled_polls = 0;
        loop {
            let settled = self.db.outstanding_flushes() == 0
                && self.db.active_compactions() == 0
                && self.keyspaces.iter().all(|k| {
                    k.sealed_memtable_count() == 0 && k.l0_table_count() < self.l0_trigger
                });
            settled_polls = if settled { settled_polls + 1 } else { 0 };
            if settled_polls == 3 {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// fjall counts no bytes written; the stats line's /proc/self/io figure still measures it.
    fn disk_bytes_written(&self) -> Option<DiskWrites> {
        None
    }

    fn stats(&self) -> String {
        let mut lines: Vec<String> = self
            .keyspaces
            .iter()
            .map(|k| {
                format!(
                    "keyspace {}: {} tables ({} in L0), {} blob files, {} bytes on disk",
                    k.name().as_ref(),
                    k.table_count(),
                    k.l0_table_count(),
                    k.blob_file_count(),
                    k.disk_space()
                )
            })
            .collect();
        lines.push(format!(
            "journals: {}; compactions: {} done, {} ms; cache: {} of {} bytes",
            self.db.journal_count(),
            self.db.compactions_completed(),
            self.db.time_compacting().as_millis(),
            self.db.cache_size(),
            self.db.cache_capacity()
        ));
        lines.join("\n")
    }

    fn close(&self) -> Result<(), String> {
        self.db.persist(PersistMode::SyncAll).map_err(err)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::parse_flags as parse;
    use super::*;

    /// The options reach fjall: reopened with fjall's defaults, each keyspace runs with what
    /// fjall recorded of the flags in its own metadata.
    #[test]
    fn fjall_runs_with_the_flags_it_was_given() {
        let dir = tempfile::tempdir().unwrap();
        let args = parse(&[
            "--bloom_bits",
            "7",
            "--write_buffer_size",
            "3145728",
            "--enable_blob_files",
            "--min_blob_size",
            "1000",
            "--num_column_families",
            "2",
        ]);
        let engine = FjallEngine::open(dir.path(), &args).unwrap();
        let value = [5u8; 100];
        engine
            .write(&[(b"0000000000000001".to_vec(), &value[..])])
            .unwrap();
        // fjall keeps its memtable budget to itself: 4 MiB into the default keyspace must have
        // filled a 3 MiB memtable (its default, 64 MiB, would hold it all).
        let big = [6u8; 1000];
        for chunk in 0..40u64 {
            let entries: Vec<(Vec<u8>, &[u8])> = (0..100)
                .map(|i| {
                    (
                        format!("{:016}", (chunk * 100 + i) * 2).into_bytes(),
                        &big[..],
                    )
                })
                .collect();
            engine.write(&entries).unwrap();
        }
        engine.wait_for_compaction().unwrap();
        assert!(engine.keyspaces[0].table_count() > 0, "{}", engine.stats());
        engine.close().unwrap();
        drop(engine);

        let db = Database::builder(dir.path()).open().unwrap();
        for name in ["default", "column_family_name_000001"] {
            let keyspace = db.keyspace(name, KeyspaceCreateOptions::default).unwrap();
            let recorded = &keyspace.config;
            assert_eq!(
                recorded.filter_policy,
                FilterPolicy::all(FilterPolicyEntry::Bloom(
                    BloomConstructionPolicy::BitsPerKey(7.0)
                )),
                "{name}"
            );
            assert_eq!(recorded.data_block_size_policy, BlockSizePolicy::all(4096));
            assert_eq!(
                recorded.data_block_compression_policy,
                CompressionPolicy::all(CompressionType::None)
            );
            assert_eq!(
                recorded.index_block_pinning_policy,
                PinningPolicy::all(true)
            );
            assert_eq!(
                recorded
                    .kv_separation_opts
                    .as_ref()
                    .map(|o| o.separation_threshold),
                Some(1000),
                "{name}"
            );
            let config = recorded.compaction_strategy.get_config();
            let l0 = config
                .iter()
                .find(|(k, _)| &**k == b"leveled_l0_threshold")
                .unwrap();
            assert_eq!(&*l0.1, &[4u8]);
        }
        // The key went where Strata's column families would have put it (1 % 2).
        let second = db
            .keyspace("column_family_name_000001", KeyspaceCreateOptions::default)
            .unwrap();
        assert!(second.get(b"0000000000000001").unwrap().is_some());
    }

    /// A flag fjall cannot honour stops the run before anything is measured.
    #[test]
    fn flags_fjall_cannot_honour_are_refused() {
        for flags in [
            &["--compression_type", "zstd"][..],
            &["--memtablerep", "bloom"],
            &["--disable_auto_compactions"],
            &["--ttl", "60"],
            &["--max_bytes_for_level_base", "1048576"],
        ] {
            let message = keyspace_options(&parse(flags)).err();
            assert!(message.is_some(), "{flags:?} was accepted");
        }
        let dir = tempfile::tempdir().unwrap();
        for flags in [&["--disable_wal"][..], &["--max_total_wal_size", "1048576"]] {
            let refused = FjallEngine::open(dir.path(), &parse(flags)).err();
            assert!(refused.is_some(), "{flags:?} was accepted");
        }
    }

    /// Reads, deletes, seeks and scans see what was written, across keyspaces.
    #[test]
    fn every_operation_sees_the_writes() {
        let dir = tempfile::tempdir().unwrap();
        let engine =
            FjallEngine::open(dir.path(), &parse(&["--num_column_families", "3"])).unwrap();
        let value = [1u8; 10];
        let keys: Vec<Vec<u8>> = (0..30u32)
            .map(|i| format!("{i:016}").into_bytes())
            .collect();
        let entries: Vec<(Vec<u8>, &[u8])> = keys.iter().map(|k| (k.clone(), &value[..])).collect();
        engine.write(&entries).unwrap();
        engine.delete(&keys[..10]).unwrap();
        assert_eq!(engine.get(&keys[9]).unwrap(), None);
        assert_eq!(engine.get(&keys[10]).unwrap(), Some(10));
        let found = engine.multi_get(&keys[8..12]).unwrap();
        assert_eq!(found, [None, None, Some(10), Some(10)]);
        assert_eq!(engine.scan().unwrap(), (20, 20 * 26));
        let mut probes = vec![keys[29].clone(), b"9".to_vec(), keys[0].clone()].into_iter();
        // The last key, nothing past the end, then a deleted key whose keyspace holds later ones.
        let landed = engine
            .seek_random(3, &mut || probes.next().unwrap())
            .unwrap();
        assert_eq!(landed, 2);
        engine.flush().unwrap();
        engine.compact().unwrap();
        engine.wait_for_compaction().unwrap();
        assert_eq!(engine.get(&keys[29]).unwrap(), Some(10));
        assert!(engine.delete_range(&keys[0], &keys[1]).is_err());
    }
}
