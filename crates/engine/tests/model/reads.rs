//! Reads checked against the models: gets, MultiGet, iterators (held across compactions too),
//! snapshots; and creating and dropping column families.

use super::*;

impl Runner {
    pub(super) fn snapshot_index(&self, at: Option<u8>) -> Option<usize> {
        let n = self.snapshots.len();
        at.filter(|_| n > 0).map(|i| i as usize % n)
    }

    /// Read options and the model a read of `slot` at `at` must match. A column family created
    /// after the snapshot reads as empty at it.
    pub(super) fn view(&self, slot: usize, at: Option<usize>) -> (ReadOptions, &Model) {
        let cf = self.cfs[slot].as_ref().expect("live column family");
        match at {
            None => (ReadOptions::default(), &cf.model),
            Some(i) => {
                let (snap, models) = &self.snapshots[i];
                let model = match &models[slot] {
                    Some((inc, m)) if *inc == cf.incarnation => m,
                    _ => &EMPTY,
                };
                let opts = ReadOptions {
                    snapshot: Some(snap.clone()),
                    ..Default::default()
                };
                (opts, model)
            }
        }
    }

    /// A read of a column family that is gone must fail with `InvalidArgument`; one never
    /// created is skipped. Returns whether `slot` is live.
    pub(super) fn readable(&mut self, slot: usize) -> bool {
        if self.cfs[slot].is_some() {
            return true;
        }
        if let Some(stale) = self.stale[slot].clone() {
            let result = self.db().get_cf(&stale, b"key").map(|_| ());
            self.expect_refused(result, "read of a dropped column family");
        }
        false
    }

    pub(super) fn get(&mut self, slot: usize, key: u32, at: Option<u8>) {
        if !self.readable(slot) {
            return;
        }
        let at = self.snapshot_index(at);
        let k = key_at(key);
        let (opts, model) = self.view(slot, at);
        let cf = &self.cfs[slot].as_ref().unwrap().handle;
        let got = self.db().get_cf_with(&opts, cf, &k).unwrap();
        let want = model.get(&k).cloned();
        assert_eq!(
            got.map(|v| v.into_vec()),
            want,
            "get {:?} in {} at snapshot {at:?}",
            String::from_utf8_lossy(&k),
            slot_name(slot)
        );
        // The same read by range: a stretch chosen from the key, which may run past the end.
        let (offset, len) = (u64::from(key % 97), u64::from(key % 251));
        let part = self.db().read_range_cf(&opts, cf, &k, offset, len).unwrap();
        let want_part = want.map(|v| {
            let start = (offset as usize).min(v.len());
            let end = ((offset + len) as usize).min(v.len());
            (v.len() as u64, v[start..end].to_vec())
        });
        assert_eq!(
            part.map(|r| (r.value_len, r.bytes.into_vec())),
            want_part,
            "read_range {:?} ({len} at {offset}) in {} at snapshot {at:?}",
            String::from_utf8_lossy(&k),
            slot_name(slot)
        );
        self.tally.checks += 1;
    }

    /// A key's expiration: `At` for a value written with a TTL, `Never` for one without, `None`
    /// when absent.
    pub(super) fn get_expiration(&mut self, slot: usize, key: u32) {
        if !self.readable(slot) {
            return;
        }
        let k = key_at(key);
        let cf = self.cfs[slot].as_ref().unwrap();
        let expected = cf.model.get(&k).map(|v| match self.expirations.get(v) {
            Some(&at) => Expiration::At(at),
            None => Expiration::Never,
        });
        let got = self.db().get_expiration(&cf.handle, &k).unwrap();
        assert_eq!(
            got,
            expected,
            "get_expiration {:?} in {}",
            String::from_utf8_lossy(&k),
            slot_name(slot)
        );
        self.tally.checks += 1;
    }

    /// A batch of keys (some repeated, possibly across column families) through MultiGet.
    pub(super) fn multi_get(&mut self, keys: &[(usize, u32)], at: Option<u8>) {
        let keys: Vec<(usize, u32)> = keys
            .iter()
            .copied()
            .filter(|&(slot, _)| self.readable(slot))
            .collect();
        if keys.is_empty() {
            return;
        }
        let at = self.snapshot_index(at);
        let opts = self.view(0, at).0;
        let got = if keys.iter().all(|&(slot, _)| slot == 0) {
            let plain: Vec<Vec<u8>> = keys.iter().map(|&(_, k)| key_at(k)).collect();
            self.db().multi_get(&opts, &plain)
        } else {
            let pairs: Vec<(&ColumnFamily, Vec<u8>)> = keys
                .iter()
                .map(|&(slot, k)| (&self.cfs[slot].as_ref().unwrap().handle, key_at(k)))
                .collect();
            self.db().multi_get_cf(&opts, &pairs)
        };
        assert_eq!(got.len(), keys.len());
        for (&(slot, k), v) in keys.iter().zip(got) {
            let k = key_at(k);
            assert_eq!(
                v.unwrap().map(|v| v.into_vec()),
                self.view(slot, at).1.get(&k).cloned(),
                "multi_get {:?} in {} at snapshot {at:?}",
                String::from_utf8_lossy(&k),
                slot_name(slot)
            );
        }
        self.tally.checks += keys.len() as u64;
    }

    /// Starts somewhere, then walks a random number of steps (switching direction now and then),
    /// comparing every position with the model.
    pub(super) fn iter(
        &mut self,
        slot: usize,
        bounds: (Option<u32>, Option<u32>),
        start: Start,
        walk: u64,
        at: Option<u8>,
    ) {
        if !self.readable(slot) {
            return;
        }
        let at = self.snapshot_index(at);
        let (mut opts, model) = self.view(slot, at);
        opts.lower_bound = bounds.0.map(key_at);
        opts.upper_bound = bounds.1.map(key_at);
        let lower = opts
            .lower_bound
            .clone()
            .map_or(Bound::Unbounded, Bound::Included);
        let upper = opts
            .upper_bound
            .clone()
            .map_or(Bound::Unbounded, Bound::Excluded);
        let in_range: Vec<(&Vec<u8>, &Vec<u8>)> = match (&lower, &upper) {
            (Bound::Included(l), Bound::Excluded(u)) if l >= u => Vec::new(),
            _ => model.range::<Vec<u8>, _>((lower, upper)).collect(),
        };
        let cf = &self.cfs[slot].as_ref().unwrap().handle;
        let mut it = self.db().iter_cf(&opts, cf).unwrap();
        let mut pos: Option<usize> = match start {
            Start::First => {
                it.seek_to_first();
                (!in_range.is_empty()).then_some(0)
            }
            Start::Last => {
                it.seek_to_last();
                in_range.len().checked_sub(1)
            }
            Start::Seek(t) => {
                let target = key_at(t);
                it.seek(&target);
                let i = in_range.partition_point(|(k, _)| k.as_slice() < target.as_slice());
                (i < in_range.len()).then_some(i)
            }
            Start::SeekForPrev(t) => {
                let target = key_at(t);
                it.seek_for_prev(&target);
                in_range
                    .partition_point(|(k, _)| k.as_slice() <= target.as_slice())
                    .checked_sub(1)
            }
        };
        let mut rng = StdRng::seed_from_u64(walk);
        let steps = rng.random_range(0..60);
        let mut forward = rng.random_ratio(1, 2);
        let mut checks = 0;
        for _ in 0..steps {
            let Some(i) = pos else {
                assert!(!it.valid(), "iterator valid past the model's end at {at:?}");
                break;
            };
            assert!(
                it.valid(),
                "iterator ended early at model index {i}: {:?}",
                it.status()
            );
            assert_eq!(it.key(), in_range[i].0.as_slice());
            assert_eq!(it.value(), in_range[i].1.as_slice());
            checks += 1;
            if rng.random_ratio(1, 10) {
                forward = !forward;
            }
            if forward {
                it.next();
                pos = (i + 1 < in_range.len()).then_some(i + 1);
            } else {
                it.prev();
                pos = i.checked_sub(1);
            }
        }
        if pos.is_none() {
            assert!(!it.valid());
        }
        it.status().unwrap();
        self.tally.checks += checks;
    }

    pub(super) fn held_iterator(&mut self, slot: usize, at: Option<u8>) {
        if !self.readable(slot) {
            return;
        }
        let at = self.snapshot_index(at);
        let (opts, model) = self.view(slot, at);
        let model = model.clone();
        let handle = self.cfs[slot].as_ref().unwrap().handle.clone();
        let mut it = self.db().iter_cf(&opts, &handle).unwrap();
        for i in 0..200u32 {
            let k = (i * 7919) % KEY_SPACE;
            self.db().put_cf(&handle, key_at(k), b"later").unwrap();
            let mut undo = Undo::new();
            let cf = self.cfs[slot].as_mut().unwrap();
            cf.put(slot, key_at(k), b"later".to_vec(), &mut undo);
            self.acknowledged(undo, false);
        }
        self.db().flush_cf(&handle).unwrap();
        self.db().compact_range_cf(&handle, None, None).unwrap();
        it.seek_to_first();
        for (k, v) in &model {
            assert!(
                it.valid(),
                "held iterator ended early before {:?}: {:?}",
                String::from_utf8_lossy(k),
                it.status()
            );
            assert_eq!(
                (it.key(), it.value()),
                (k.as_slice(), v.as_slice()),
                "held iterator"
            );
            it.next();
        }
        assert!(!it.valid());
        it.status().unwrap();
        self.tally.checks += model.len() as u64;
    }

    pub(super) fn take_snapshot(&mut self) {
        if self.snapshots.len() < 6 {
            let s = self.db().snapshot();
            let models = self
                .cfs
                .iter()
                .map(|cf| cf.as_ref().map(|cf| (cf.incarnation, cf.model.clone())))
                .collect();
            self.snapshots.push((s, models));
        }
    }

    pub(super) fn create_cf(&mut self, slot: usize) {
        let opts: ColumnFamilyOptions = (*options(self.cfg, &self.fs, self.clock.as_ref())).clone();
        let result = self.db().create_cf(&slot_name(slot), opts);
        if self.cfs[slot].is_some() {
            return self.expect_refused(result.map(|_| ()), "creating an existing column family");
        }
        self.incarnations += 1;
        self.cfs[slot] = Some(Cf {
            handle: result.unwrap(),
            model: Model::new(),
            incarnation: self.incarnations,
        });
        self.stale[slot] = None;
        self.tally.cf_created += 1;
    }

    pub(super) fn drop_cf(&mut self, slot: usize) {
        match (slot, &self.cfs[slot], &self.stale[slot]) {
            (0, Some(cf), _) => {
                let result = self.db().drop_cf(&cf.handle);
                self.expect_refused(result, "dropping the default column family");
            }
            (_, Some(cf), _) => {
                self.db().drop_cf(&cf.handle).unwrap();
                self.stale[slot] = self.cfs[slot].take().map(|cf| cf.handle);
                self.tally.cf_dropped += 1;
            }
            (_, None, Some(stale)) => {
                let result = self.db().drop_cf(stale);
                self.expect_refused(result, "dropping a dropped column family");
            }
            (_, None, None) => {}
        }
    }
}
