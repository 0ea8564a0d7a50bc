//! The options every stream runs with, and the seeded generator of its operations.

use super::*;

/// Tiny buffers and level targets: flushes, L0 compactions, level compactions and trivial moves
/// happen all the time. With blob files, values of 30 bytes or more go to small blob files that
/// garbage collection keeps relocating, and TTLs are judged by the test clock.
pub(super) fn options(
    cfg: Config,
    fs: &FaultInjectionFs,
    clock: Option<&Arc<ManualClock>>,
) -> Options {
    let mut o = Options::default();
    o.filesystem = Arc::new(fs.clone());
    if let Some(clock) = clock {
        o.clock = clock.clone();
        o.enable_blob_files = true;
        o.min_blob_size = 30;
        o.blob_file_size = 16 << 10;
        o.ttl_range_secs = 50;
        o.blob_garbage_collection_age_cutoff = 0.5;
    }
    o.write_buffer_size = 32 << 10;
    o.max_write_buffer_number = 3;
    o.block_size = 512;
    // Static sizing: a cache small enough to churn, holding index and filter blocks (pinned at
    // L0), evicting by CLOCK; dynamic sizing: the defaults.
    if !cfg.dynamic {
        o.cache_size = 64 << 10;
        o.cache_kind = strata_engine::CacheKind::Clock;
        o.cache_index_and_filter_blocks = true;
        o.pin_l0_filter_and_index_blocks_in_cache = true;
    } else {
        o.cache_size = 4 << 20;
    }
    o.level0_file_num_compaction_trigger = 2;
    o.level0_slowdown_writes_trigger = 6;
    o.level0_stop_writes_trigger = 10;
    // Range deletions keep the live set small: a small base level still makes it deep.
    o.max_bytes_for_level_base = 32 << 10;
    o.max_bytes_for_level_multiplier = 4;
    o.target_file_size_base = 16 << 10;
    o.level_compaction_dynamic_level_bytes = cfg.dynamic;
    o
}

/// The operation stream of a seed. It tracks which column families it created so that most
/// operations name live ones; the runner copes with any stream (a shrunk one lacks context).
pub(super) struct Generator {
    rng: StdRng,
    blobs: bool,
    live: [bool; SLOTS],
    /// The last range deleted, by key index: the next one may sit beside it or inside it.
    last_range: (u32, u32),
    next_id: u64,
}

impl Generator {
    pub(super) fn new(seed: u64, blobs: bool) -> Self {
        Generator {
            rng: StdRng::seed_from_u64(seed),
            blobs,
            live: [true, false, false, false],
            last_range: (0, 1),
            next_id: 0,
        }
    }

    pub(super) fn key(&mut self) -> u32 {
        self.rng.random_range(0..KEY_SPACE)
    }

    pub(super) fn value(&mut self) -> Val {
        let len = if self.rng.random_ratio(1, 50) {
            self.rng.random_range(1000..5000)
        } else {
            self.rng.random_range(0..40)
        };
        self.next_id += 1;
        Val {
            id: self.next_id,
            len,
        }
    }

    /// The default column family more often than not, else a live other one.
    pub(super) fn slot(&mut self) -> usize {
        let others: Vec<usize> = (1..SLOTS).filter(|&s| self.live[s]).collect();
        if others.is_empty() || self.rng.random_ratio(3, 5) {
            0
        } else {
            others[self.rng.random_range(0..others.len())]
        }
    }

    pub(super) fn at(&mut self) -> Option<u8> {
        self.rng.random_ratio(1, 2).then(|| self.rng.random())
    }

    /// A range to delete in one of several shapes.
    pub(super) fn range(&mut self, slot: usize) -> Write {
        let (last_from, last_to) = self.last_range;
        let from = self.key();
        let (from, to) = match self.rng.random_range(0..12) {
            0..=6 => (from, from + self.rng.random_range(1..30)),
            7 => (from, from + self.rng.random_range(30..300)),
            8 => return Write::DeleteRange(slot, from, from),
            9 => (last_to, last_to + self.rng.random_range(1..30)),
            _ => {
                let a = self.rng.random_range(last_from..last_to);
                (a, self.rng.random_range(a + 1..=last_to))
            }
        };
        self.last_range = (from, to);
        Write::DeleteRange(slot, from, to)
    }

    pub(super) fn partial(&mut self, slot: usize) -> Write {
        let key = self.key();
        let mut value = self.value();
        if self.rng.random_ratio(1, 8) {
            // Values pass the plain-value limit (4 KiB) and become extent lists.
            value.len = self.rng.random_range(4000..20_000);
        }
        let other = (key + self.rng.random_range(1..40)) % KEY_SPACE;
        let p = match self.rng.random_range(0..10) {
            0..=3 => Partial::Append(value),
            4..=6 => Partial::WriteAt(self.rng.random_range(0..30_000), value),
            7 => Partial::Truncate(self.rng.random_range(0..30_000)),
            8 => Partial::Copy(other),
            _ => Partial::Rename(other),
        };
        Write::Partial(slot, key, p)
    }

    pub(super) fn write(&mut self, slot: usize) -> Write {
        if self.rng.random_ratio(1, 100) {
            self.range(slot)
        } else if self.rng.random_ratio(1, 10) {
            self.partial(slot)
        } else if self.rng.random_ratio(1, 4) {
            Write::Delete(slot, self.key())
        } else {
            Write::Put(slot, self.key(), self.value())
        }
    }

    pub(super) fn op(&mut self) -> Op {
        let choice = self.rng.random_range(0..1000);
        match choice {
            0..=49 if self.blobs => Op::PutTtl {
                cf: self.slot(),
                key: self.key(),
                value: self.value(),
                ttl: self.rng.random_range(1..200),
                absolute: self.rng.random_ratio(1, 2),
            },
            50..=54 if self.blobs => Op::AdvanceClock(self.rng.random_range(1..60)),
            0..=399 => {
                let slot = self.slot();
                let write = Write::Put(slot, self.key(), self.value());
                Op::Write {
                    write,
                    sync: self.rng.random_ratio(1, 100),
                }
            }
            400..=459 => Op::Write {
                write: Write::Delete(self.slot(), self.key()),
                sync: false,
            },
            460..=484 => {
                let slot = self.slot();
                Op::Write {
                    write: self.partial(slot),
                    sync: self.rng.random_ratio(1, 10),
                }
            }
            485..=499 => {
                let slot = self.slot();
                Op::Write {
                    write: self.range(slot),
                    sync: false,
                }
            }
            500..=559 => {
                let n = self.rng.random_range(1..20);
                Op::Batch(
                    (0..n)
                        .map(|_| {
                            let slot = self.slot();
                            self.write(slot)
                        })
                        .collect(),
                )
            }
            560..=579 => Op::GetExpiration {
                cf: self.slot(),
                key: self.key(),
            },
            580..=759 => Op::Get {
                cf: self.slot(),
                key: self.key(),
                at: self.at(),
            },
            760..=799 => {
                let n = self.rng.random_range(1..40);
                let single = self.rng.random_ratio(1, 2);
                let mut keys: Vec<(usize, u32)> = (0..n)
                    .map(|_| (if single { 0 } else { self.slot() }, self.key()))
                    .collect();
                keys.push(keys[0]);
                Op::MultiGet {
                    keys,
                    at: self.at(),
                }
            }
            800..=899 => Op::Iter {
                cf: self.slot(),
                lower: self.rng.random_ratio(1, 2).then(|| self.key()),
                upper: self.rng.random_ratio(1, 2).then(|| self.key()),
                start: match self.rng.random_range(0..4) {
                    0 => Start::First,
                    1 => Start::Last,
                    2 => Start::Seek(self.key()),
                    _ => Start::SeekForPrev(self.key()),
                },
                walk: self.rng.random(),
                at: self.at(),
            },
            900..=929 => Op::TakeSnapshot,
            930..=964 => Op::ReleaseSnapshot(self.rng.random()),
            965..=984 => Op::Flush(self.slot()),
            985..=990 => {
                let (a, b) = (self.key(), self.key());
                let range = (choice < 989).then(|| (a.min(b), a.max(b)));
                Op::CompactRange(self.slot(), range)
            }
            991..=994 => Op::HeldIterator {
                cf: self.slot(),
                at: self.at(),
            },
            995..=997 => {
                // Mostly toggles a column family; now and then asks for the impossible: create
                // one that exists, drop one that is gone, drop the default.
                let slot = self.rng.random_range(0..SLOTS);
                let absent = slot != 0 && !self.live[slot];
                let sensible = !self.rng.random_ratio(1, 5);
                let create = if sensible { absent } else { !absent };
                if sensible && slot != 0 {
                    self.live[slot] = create;
                }
                if create {
                    Op::CreateCf(slot)
                } else {
                    Op::DropCf(slot)
                }
            }
            998 => Op::Crash {
                tail: self.rng.random_ratio(1, 2).then(|| self.rng.random()),
            },
            _ if self.rng.random_ratio(1, 2) => Op::Damage {
                seed: self.rng.random(),
            },
            _ => Op::Reopen,
        }
    }
}
