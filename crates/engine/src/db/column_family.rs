//! Column families: independent key spaces that share one WAL (so a batch across them is atomic),
//! one MANIFEST, the block and table caches and the background pool. Each has its own memtables,
//! levels, options and compaction statistics.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{Condvar, Mutex, RwLock};

use super::compaction_state::{CompactionState, LevelStats};
use super::room::Pressure;
use super::{DbInner, SuperVersion};
use crate::error::{Error, Result};
use crate::events::StallCause;
use crate::memtable::MemTable;
use crate::options::ColumnFamilyOptions;
use crate::sst::TableOptions;
use crate::version::{NUM_LEVELS, Version};

/// Longest accepted column family name, in bytes.
pub(crate) const MAX_CF_NAME: usize = 1024;

/// What one column family keeps for its whole life; its memtables live in [`CfState`].
pub(crate) struct ColumnFamilyData {
    pub(crate) id: u32,
    pub(crate) name: String,
    pub(crate) opts: ColumnFamilyOptions,
    pub(crate) table_opts: TableOptions,
    /// What reads see: memtables and version, swapped whole.
    pub(crate) view: RwLock<Arc<SuperVersion>>,
    pub(crate) compaction: Mutex<CompactionState>,
    /// Signalled when one of this column family's compactions finishes.
    pub(crate) compaction_done: Condvar,
    /// Serialises `compact_range` calls on this column family.
    pub(crate) manual_compaction: Mutex<()>,
    pub(crate) level_stats: [LevelStats; NUM_LEVELS],
    pub(crate) dropped: AtomicBool,
    /// On the scheduler's flush or compaction queue: a column family is queued at most once.
    pub(crate) queued_for_flush: AtomicBool,
    pub(crate) queued_for_compaction: AtomicBool,
    /// The store this column family belongs to, so a handle cannot be used on another one.
    db_id: u64,
}

impl std::fmt::Debug for ColumnFamilyData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnFamily")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish()
    }
}

impl ColumnFamilyData {
    pub(crate) fn new(
        db_id: u64,
        id: u32,
        name: String,
        opts: ColumnFamilyOptions,
        version: Arc<Version>,
        blob_epoch: Option<Arc<crate::blob::BlobEpoch>>,
    ) -> Self {
        let view = SuperVersion {
            pressure: Pressure::of(&version, &opts, 1),
            mem: new_memtable(&opts, 0),
            imm: Vec::new(),
            version,
            _blob_epoch: blob_epoch,
        };
        ColumnFamilyData {
            id,
            name,
            table_opts: TableOptions::from_options(&opts, id),
            opts,
            view: RwLock::new(Arc::new(view)),
            compaction: Mutex::new(CompactionState::default()),
            compaction_done: Condvar::new(),
            manual_compaction: Mutex::new(()),
            level_stats: Default::default(),
            dropped: AtomicBool::new(false),
            queued_for_flush: AtomicBool::new(false),
            queued_for_compaction: AtomicBool::new(false),
            db_id,
        }
    }

    /// Empties a dropped family's view: its memtables and tables are held only by the reads
    /// that still use them.
    pub(crate) fn clear_view(&self) {
        *self.view.write() = Arc::new(SuperVersion {
            mem: self.new_memtable(0),
            imm: Vec::new(),
            version: Arc::default(),
            pressure: Pressure::default(),
            _blob_epoch: None,
        });
    }

    pub(crate) fn current_view(&self) -> Arc<SuperVersion> {
        self.view.read().clone()
    }

    /// Puts the memtable a read-only open replayed its WALs into in place of the empty one.
    pub(crate) fn install_recovered_memtable(&self, mem: Arc<MemTable>) {
        let mut view = self.view.write();
        let next = SuperVersion {
            mem,
            imm: view.imm.clone(),
            version: view.version.clone(),
            pressure: view.pressure,
            _blob_epoch: view._blob_epoch.clone(),
        };
        *view = Arc::new(next);
    }

    pub(crate) fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    /// What this column family's memtables may hold at most.
    pub(crate) fn memtable_budget(&self) -> u64 {
        self.opts.write_buffer_size as u64 * self.opts.max_write_buffer_number as u64
    }

    pub(crate) fn new_memtable(&self, id: u64) -> Arc<MemTable> {
        new_memtable(&self.opts, id)
    }
}

/// An empty memtable numbered `id`, sized and filtered as `opts` say.
pub(crate) fn new_memtable(opts: &ColumnFamilyOptions, id: u64) -> Arc<MemTable> {
    Arc::new(MemTable::new(
        id,
        opts.write_buffer_size,
        opts.memtable_bloom_ratio(),
    ))
}

/// Puts `value` at index `i`, growing `slots` as needed (column families are kept by id).
pub(crate) fn put_slot<T>(slots: &mut Vec<Option<T>>, i: usize, value: T) {
    if slots.len() <= i {
        slots.resize_with(i + 1, || None);
    }
    slots[i] = Some(value);
}

/// A handle on a column family, from [`crate::Db::create_cf`], [`crate::Db::cf`] or
/// [`crate::Db::default_cf`]. Cheap to clone. Once the column family is dropped, operations through
/// the handle fail with `InvalidArgument`.
#[derive(Debug, Clone)]
pub struct ColumnFamily {
    pub(crate) data: Arc<ColumnFamilyData>,
}

impl ColumnFamily {
    /// The column family's name (`"default"` for the default one).
    pub fn name(&self) -> &str {
        &self.data.name
    }

    /// Its id: the default column family is 0, ids are never reused.
    pub fn id(&self) -> u32 {
        self.data.id
    }

    /// The options it runs with.
    pub fn options(&self) -> &ColumnFamilyOptions {
        &self.data.opts
    }

    /// Checks that the handle belongs to store `db_id` and was not dropped.
    pub(crate) fn resolve(&self, db_id: u64) -> Result<&Arc<ColumnFamilyData>> {
        if self.data.db_id != db_id {
            return Err(Error::InvalidArgument(format!(
                "column family {} belongs to another store",
                self.data.name
            )));
        }
        if self.data.is_dropped() {
            return Err(Error::InvalidArgument(format!(
                "column family {} was dropped",
                self.data.name
            )));
        }
        Ok(&self.data)
    }
}

/// The column families by id and name, read on every write that names one.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    pub(crate) by_id: Vec<Option<Arc<ColumnFamilyData>>>,
    pub(crate) by_name: HashMap<String, u32>,
}

impl Registry {
    pub(crate) fn get(&self, id: u32) -> Option<&Arc<ColumnFamilyData>> {
        self.by_id.get(id as usize)?.as_ref()
    }

    pub(crate) fn insert(&mut self, data: Arc<ColumnFamilyData>) {
        self.by_name.insert(data.name.clone(), data.id);
        put_slot(&mut self.by_id, data.id as usize, data);
    }

    pub(crate) fn remove(&mut self, id: u32) {
        if let Some(slot) = self.by_id.get_mut(id as usize)
            && let Some(data) = slot.take()
        {
            self.by_name.remove(&data.name);
        }
    }
}

/// One column family's memtables, under the database's state lock.
#[derive(Debug)]
pub(crate) struct CfState {
    pub(crate) data: Arc<ColumnFamilyData>,
    pub(crate) mem: Arc<MemTable>,
    /// The WAL the active memtable's first write went to (`None` while it is empty).
    pub(crate) mem_first_log: Option<u64>,
    /// Immutable memtables, oldest first, each with the WAL its first write went to.
    pub(crate) imm: VecDeque<(Arc<MemTable>, u64)>,
    pub(crate) flush_running: bool,
    /// Memtables get increasing ids so that `flush` knows when the ones it waits for are gone.
    pub(crate) next_memtable_id: u64,
}

impl CfState {
    pub(crate) fn new(data: Arc<ColumnFamilyData>) -> Self {
        let mem = data.current_view().mem.clone();
        CfState {
            next_memtable_id: mem.id + 1,
            data,
            mem,
            mem_first_log: None,
            imm: VecDeque::new(),
            flush_running: false,
        }
    }

    /// The oldest WAL holding data of this column family that is not in its tables.
    pub(crate) fn oldest_log(&self) -> Option<u64> {
        self.imm.front().map(|(_, l)| *l).or(self.mem_first_log)
    }
}

/// Which WALs column families still need, and which column families ask writers to slow down or
/// stop. Kept incrementally, so that neither writes nor WAL deletion look at every column family.
#[derive(Debug, Default)]
pub(crate) struct CfTracker {
    /// (WAL number, column family) for each column family's oldest unflushed WAL.
    pub(crate) wal_pins: BTreeSet<(u64, u32)>,
    pub(crate) stopping: BTreeMap<u32, StallCause>,
    pub(crate) slowing: BTreeMap<u32, StallCause>,
}

impl CfTracker {
    /// Moves column family `id`'s pin from the WAL `old` to `new`.
    pub(crate) fn repin(&mut self, id: u32, old: Option<u64>, new: Option<u64>) {
        if old == new {
            return;
        }
        if let Some(w) = old {
            self.wal_pins.remove(&(w, id));
        }
        if let Some(w) = new {
            self.wal_pins.insert((w, id));
        }
    }

    /// The oldest WAL some column family still needs.
    pub(crate) fn oldest_pinned_wal(&self) -> Option<u64> {
        self.wal_pins.first().map(|(w, _)| *w)
    }

    /// Column families whose oldest unflushed data is in WAL `wal`.
    pub(crate) fn pinning(&self, wal: u64) -> impl Iterator<Item = u32> + '_ {
        self.wal_pins
            .range((wal, 0)..=(wal, u32::MAX))
            .map(|(_, id)| *id)
    }

    pub(crate) fn set_pressure(&mut self, id: u32, p: Pressure) {
        match p.stop {
            Some(c) => self.stopping.insert(id, c),
            None => self.stopping.remove(&id),
        };
        match p.slowdown {
            Some(c) => self.slowing.insert(id, c),
            None => self.slowing.remove(&id),
        };
    }

    pub(crate) fn forget(&mut self, id: u32, oldest_log: Option<u64>) {
        self.repin(id, oldest_log, None);
        self.stopping.remove(&id);
        self.slowing.remove(&id);
    }
}

/// Checks a name for `create_cf`.
pub(crate) fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_CF_NAME {
        return Err(Error::InvalidArgument(format!(
            "column family names are 1 to {MAX_CF_NAME} bytes long"
        )));
    }
    Ok(())
}

/// Creating and dropping column families: MANIFEST edits first, then the registry.
impl DbInner {
    pub(super) fn create_cf(&self, name: &str, opts: ColumnFamilyOptions) -> Result<ColumnFamily> {
        validate_name(name)?;
        opts.validate()?;
        let _admin = self.cf_admin.lock();
        if self.registry.read().by_name.contains_key(name) {
            return Err(Error::InvalidArgument(format!(
                "column family {name} already exists"
            )));
        }
        // Records for the new column family can only go to this WAL or later ones.
        let current_wal = self.state.lock().current_wal;
        let last_seq = self.last_sequence.load(Ordering::Acquire);
        let (id, version) = {
            let mut vs = self.versions.lock();
            let id = vs.next_column_family_id();
            let edit = crate::version::VersionEdit {
                column_family: id,
                add_column_family: Some(name.to_string()),
                cf_options: Some(crate::version::encode_cf_options(&opts)),
                log_number: Some(current_wal),
                ..Default::default()
            };
            vs.log_and_apply(edit, last_seq)?;
            let version = vs.current(id).unwrap_or_default();
            (id, version)
        };
        let data = Arc::new(ColumnFamilyData::new(
            self.id,
            id,
            name.to_string(),
            opts,
            version,
            self.blobs.current_epoch(),
        ));
        {
            let mut st = self.state.lock();
            put_slot(&mut st.cfs, id as usize, CfState::new(data.clone()));
            st.memtable_budget += data.memtable_budget();
        }
        self.registry.write().insert(data.clone());
        self.update_blob_threshold();
        Ok(ColumnFamily { data })
    }

    pub(super) fn drop_cf(&self, cf: &Arc<ColumnFamilyData>) -> Result<()> {
        if cf.id == 0 {
            return Err(Error::InvalidArgument(
                "the default column family cannot be dropped".into(),
            ));
        }
        let _admin = self.cf_admin.lock();
        if cf.is_dropped() {
            return Err(Error::InvalidArgument(format!(
                "column family {} was dropped",
                cf.name
            )));
        }
        let last_seq = self.last_sequence.load(Ordering::Acquire);
        let last_version = {
            let mut vs = self.versions.lock();
            let last = vs.current(cf.id);
            vs.log_and_apply(
                crate::version::VersionEdit {
                    column_family: cf.id,
                    drop_column_family: true,
                    ..Default::default()
                },
                last_seq,
            )?;
            // Set under the version lock: a background job whose edit was refused because of this
            // drop takes the lock after it, so it sees the flag and ends quietly instead of
            // reporting a background error.
            cf.dropped.store(true, Ordering::Release);
            last
        };
        self.registry.write().remove(cf.id);
        self.update_blob_threshold();
        let wals = {
            let mut st = self.state.lock();
            if let Some(cs) = st.cfs.get_mut(cf.id as usize).and_then(Option::take) {
                st.tracker.forget(cf.id, cs.oldest_log());
                st.memtable_budget -= cf.memtable_budget();
            }
            st.take_obsolete_wals()
        };
        // Writers stalled on this column family's compaction debt may go on.
        self.state_cv.notify_all();
        // Free the memtables now; the tables go once no iterator reads them.
        cf.clear_view();
        if let Some(v) = last_version {
            self.obsolete
                .lock()
                .extend(v.levels.iter().flatten().cloned());
        }
        self.purge_obsolete_files();
        self.remove_wals(wals);
        Ok(())
    }
}
