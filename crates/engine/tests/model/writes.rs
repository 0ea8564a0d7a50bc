//! Writes on the store and the models together: puts, deletes, batches, TTL puts, and undoing
//! what a crash lost.

use super::*;

impl Runner {
    pub(super) fn new(cfg: Config) -> Self {
        let dir = common::tempdir();
        let fs = FaultInjectionFs::new();
        let clock = cfg.blobs.then(|| Arc::new(ManualClock::new(1_700_000_000)));
        let db = Db::open(dir.path(), options(cfg, &fs, clock.as_ref())).unwrap();
        let default = Cf {
            handle: db.default_cf(),
            model: Model::new(),
            incarnation: 0,
        };
        Runner {
            cfg,
            dir,
            fs,
            clock,
            db: Some(db),
            cfs: vec![Some(default), None, None, None],
            stale: vec![None; SLOTS],
            snapshots: Vec::new(),
            unsynced: Vec::new(),
            since_open: Vec::new(),
            incarnations: 0,
            expirations: HashMap::new(),
            tally: Tally::default(),
        }
    }

    pub(super) fn db(&self) -> &Db {
        self.db.as_ref().expect("open")
    }

    pub(super) fn now(&self) -> u64 {
        self.clock.as_ref().map_or(0, |c| c.now_secs())
    }

    pub(super) fn live(&self, value: &[u8]) -> bool {
        unexpired(&self.expirations, self.now(), value)
    }

    /// Applies a write to the models, recording what it replaced in `undo`; false when the
    /// store must refuse it (a partial write of a missing key), which changes nothing.
    pub(super) fn apply(&mut self, write: &Write, undo: &mut Undo) -> bool {
        let slot = write.slot();
        if self.cfg.sabotage && slot == 2 && !matches!(write, Write::Put(..)) {
            return true;
        }
        let Some(cf) = self.cfs[slot].as_mut() else {
            return true;
        };
        let doomed: Vec<Vec<u8>> = match write {
            Write::Put(_, k, v) => {
                cf.put(slot, key_at(*k), v.bytes(), undo);
                return true;
            }
            Write::Partial(_, k, p) => {
                let key = key_at(*k);
                let Some(old) = cf
                    .model
                    .get(&key)
                    .cloned()
                    .or_else(|| matches!(p, Partial::Append(_)).then(Vec::new))
                else {
                    return false;
                };
                let expiration = self.expirations.get(&old).copied();
                let mut new = old;
                match p {
                    Partial::Append(v) => new.extend_from_slice(&v.bytes()),
                    Partial::WriteAt(off, v) => {
                        let (off, v) = (*off as usize, v.bytes());
                        if new.len() < off + v.len() {
                            new.resize(off + v.len(), 0);
                        }
                        new[off..off + v.len()].copy_from_slice(&v);
                    }
                    Partial::Truncate(len) => new.resize(*len as usize, 0),
                    Partial::Copy(to) | Partial::Rename(to) => {
                        cf.put(slot, key_at(*to), new, undo);
                        if matches!(p, Partial::Rename(_))
                            && let Some(old) = cf.model.remove(&key)
                        {
                            undo.push((slot, cf.incarnation, key, Some(old)));
                        }
                        return true;
                    }
                }
                if let Some(e) = expiration {
                    // The expiration goes with the value's new bytes.
                    self.expirations.insert(new.clone(), e);
                }
                cf.put(slot, key, new, undo);
                return true;
            }
            Write::Delete(_, k) => vec![key_at(*k)],
            Write::DeleteRange(_, from, to) => {
                self.tally.range_deletes += 1;
                let (start, end) = range_bounds(*from, *to);
                cf.model
                    .range::<[u8], _>((Bound::Included(&start[..]), Bound::Excluded(&end[..])))
                    .map(|(k, _)| k.clone())
                    .collect()
            }
        };
        for k in doomed {
            if let Some(old) = cf.model.remove(&k) {
                undo.push((slot, cf.incarnation, k, Some(old)));
            }
        }
        true
    }

    /// Puts the models back as they were before the writes `undo` recorded.
    pub(super) fn roll_back(&mut self, undo: Undo) {
        for (slot, incarnation, k, old) in undo.into_iter().rev() {
            let Some(cf) = self.cfs[slot].as_mut() else {
                continue;
            };
            if cf.incarnation != incarnation {
                continue;
            }
            match old {
                Some(v) => cf.model.insert(k, v),
                None => cf.model.remove(&k),
            };
        }
    }

    /// A write the models say the store must refuse as `NotFound`.
    pub(super) fn expect_not_found(&mut self, result: strata_engine::Result<()>, what: &str) {
        match result {
            Err(Error::NotFound(_)) => self.tally.refused += 1,
            other => panic!("{what}: expected NotFound, got {other:?}"),
        }
    }

    /// Records a write that succeeded: a synced one makes every earlier one durable.
    pub(super) fn acknowledged(&mut self, undo: Undo, sync: bool) {
        if !undo.is_empty() {
            self.since_open.push(undo.clone());
        }
        if sync {
            self.unsynced.clear();
        } else if !undo.is_empty() {
            self.unsynced.push(undo);
        }
    }

    /// Misuse (a dropped column family, an existing name, the default dropped) must be refused
    /// with `InvalidArgument`.
    pub(super) fn expect_refused(&mut self, result: strata_engine::Result<()>, what: &str) {
        match result {
            Err(Error::InvalidArgument(_)) => self.tally.refused += 1,
            other => panic!("{what}: expected InvalidArgument, got {other:?}"),
        }
    }

    /// A write to the column family of the write's slot: live, it must succeed and the models
    /// follow; dropped, it must be refused and nothing changes; never created, it is skipped (a
    /// shrunk stream may lack the creation).
    pub(super) fn write(&mut self, write: &Write, sync: bool) {
        let slot = write.slot();
        let handle = match (&self.cfs[slot], &self.stale[slot]) {
            (Some(cf), _) => cf.handle.clone(),
            (None, Some(stale)) => {
                let stale = stale.clone();
                let result = self.single_write(&stale, write, sync);
                return self.expect_refused(result, "write to a dropped column family");
            }
            (None, None) => return,
        };
        let result = self.single_write(&handle, write, sync);
        let mut undo = Undo::new();
        if !self.apply(write, &mut undo) {
            return self.expect_not_found(result, "partial write of a missing key");
        }
        result.unwrap();
        self.acknowledged(undo, sync);
    }

    /// One write through the narrowest API: the `_with` forms in the default column family, the
    /// `_cf` forms elsewhere (a one-entry batch when synced).
    pub(super) fn single_write(
        &self,
        cf: &ColumnFamily,
        write: &Write,
        sync: bool,
    ) -> strata_engine::Result<()> {
        let db = self.db();
        let wo = WriteOptions {
            sync,
            disable_wal: false,
            ..Default::default()
        };
        if (cf.id() != 0 && sync) || matches!(write, Write::Partial(..)) {
            let mut b = WriteBatch::new();
            add_to_batch(&mut b, cf, write);
            return db.write(b, &wo);
        }
        match (write, cf.id() == 0) {
            (Write::Put(_, k, v), true) => db.put_with(&wo, key_at(*k), v.bytes()),
            (Write::Put(_, k, v), false) => db.put_cf(cf, key_at(*k), v.bytes()),
            (Write::Delete(_, k), true) => db.delete_with(&wo, key_at(*k)),
            (Write::Delete(_, k), false) => db.delete_cf(cf, key_at(*k)),
            (Write::DeleteRange(_, from, to), true) => {
                let (s, e) = range_bounds(*from, *to);
                db.delete_range_with(&wo, s, e)
            }
            (Write::DeleteRange(_, from, to), false) => {
                let (s, e) = range_bounds(*from, *to);
                db.delete_range_cf(cf, s, e)
            }
            (Write::Partial(..), _) => unreachable!("written as a batch above"),
        }
    }

    /// One batch across column families; with a dropped one in it, the whole batch is refused.
    pub(super) fn batch(&mut self, writes: &[Write]) {
        let mut b = WriteBatch::new();
        let mut refused = false;
        for w in writes {
            match (&self.cfs[w.slot()], &self.stale[w.slot()]) {
                (Some(cf), _) => add_to_batch(&mut b, &cf.handle, w),
                (None, Some(stale)) => {
                    add_to_batch(&mut b, stale, w);
                    refused = true;
                }
                (None, None) => {}
            }
        }
        let result = self.db().write(b, &WriteOptions::default());
        if refused {
            return self.expect_refused(result, "batch naming a dropped column family");
        }
        let mut undo = Undo::new();
        let mut done = true;
        for w in writes {
            done &= self.apply(w, &mut undo);
        }
        if !done {
            self.roll_back(undo);
            return self.expect_not_found(result, "batch with a partial write of a missing key");
        }
        result.unwrap();
        self.acknowledged(undo, false);
    }

    pub(super) fn put_ttl(&mut self, slot: usize, key: u32, value: Val, ttl: u64, absolute: bool) {
        let Some(cf) = &self.cfs[slot] else { return };
        let (k, v) = (key_at(key), value.bytes());
        let expiration = self.now() + ttl;
        if absolute {
            self.db().put_until(&cf.handle, &k, &v, expiration).unwrap();
        } else {
            self.db().put_with_ttl(&cf.handle, &k, &v, ttl).unwrap();
        }
        self.expirations.insert(v, expiration);
        self.tally.ttl_puts += 1;
        let mut undo = Undo::new();
        self.apply(&Write::Put(slot, key, value), &mut undo);
        self.acknowledged(undo, false);
    }

    /// Moves the test clock; every value whose expiration passes vanishes from the models and
    /// from every snapshot's copy (expiry is by the clock, not by snapshot).
    pub(super) fn advance_clock(&mut self, secs: u64) {
        let Some(clock) = &self.clock else { return };
        clock.advance(secs);
        self.drop_expired();
    }

    /// Removes what has expired by now from the models and the snapshots' copies.
    pub(super) fn drop_expired(&mut self) {
        let now = self.now();
        let exp = &self.expirations;
        let live = |v: &Vec<u8>| unexpired(exp, now, v);
        for cf in self.cfs.iter_mut().flatten() {
            let before = cf.model.len();
            cf.model.retain(|_, v| live(v));
            self.tally.expired += (before - cf.model.len()) as u64;
        }
        for (_, models) in &mut self.snapshots {
            for (_, m) in models.iter_mut().flatten() {
                m.retain(|_, v| live(v));
            }
        }
    }
}
