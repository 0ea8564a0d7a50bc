//! Repair's WAL replay: records go into memtables, around damaged regions, and the memtables
//! into L0 tables as they fill.

use std::collections::BTreeSet;

use super::Repair;
use crate::blob::BlobGarbage;
use crate::db::batch::WriteBatch;
use crate::db::column_family::new_memtable;
use crate::db::flush::write_level0_table;
use crate::db::write::apply_to_memtable;
use crate::error::Result;
use crate::filename;
use crate::sst::TableOptions;
use crate::wal::{LogReader, ReadOutcome, decode_seal};

impl Repair<'_> {
    /// Replays WAL `number` into memtables (around damaged regions), flushing them to L0 tables
    /// as they fill.
    pub(super) fn replay_wal(&mut self, number: u64) -> Result<()> {
        self.next_file = self.next_file.max(number + 1);
        let path = filename::wal_file(self.dir, number);
        if self.cfs.values().all(|cf| number < cf.log_number) {
            return Ok(()); // every column family had flushed it; the next open removes it
        }
        let data = crate::wal::read_log(self.fs.as_ref(), &path)?;
        let mut reader = LogReader::new(&data, &path, ReadOutcome::SkipDamage).reading_a_wal();
        let mut bad_records = 0u64;
        while let Some(record) = reader.next_record()? {
            if decode_seal(&record).is_some() {
                continue;
            }
            let Some(batch) = WriteBatch::from_bytes(record) else {
                bad_records += 1;
                continue;
            };
            let mut cfs_written = BTreeSet::new();
            let mut count = 0u64;
            if batch
                .for_each(|r| {
                    cfs_written.insert(r.cf);
                    count += 1;
                })
                .is_err()
            {
                bad_records += 1;
                continue;
            }
            let mut touched = BTreeSet::new();
            for cf in cfs_written {
                if let Some(id) = self.column_family_for(cf)
                    && self.cfs.get(&id).is_some_and(|p| number >= p.log_number)
                {
                    touched.insert(id);
                }
            }
            for &id in &touched {
                if let Some(plan) = self.cfs.get_mut(&id) {
                    let mem = plan
                        .mem
                        .get_or_insert_with(|| new_memtable(&plan.options, 0))
                        .clone();
                    // Each record keeps its own sequence number: its place in the batch.
                    let mut seq = batch.sequence();
                    let _ = batch.for_each(|r| {
                        if r.cf == id {
                            apply_to_memtable(&mem, seq, &r);
                        }
                        seq += 1;
                    });
                }
            }
            let seq = batch.sequence() + count;
            self.last_sequence = self.last_sequence.max(seq.saturating_sub(1));
            self.report.wal_records_replayed += 1;
            for id in touched {
                let full = self.cfs.get(&id).is_some_and(|p| {
                    p.mem
                        .as_ref()
                        .is_some_and(|m| m.memory_usage() >= p.options.write_buffer_size)
                });
                if full {
                    self.flush_memtable(id)?;
                }
            }
        }
        let damaged = reader.skipped_regions + usize::from(reader.tail_damage.is_some());
        if damaged > 0 || bad_records > 0 {
            self.keep_aside(
                &path,
                format!(
                    "damaged WAL: {damaged} damaged regions and {bad_records} unreadable records \
                     were skipped; the records around them were replayed"
                ),
            )?;
        }
        Ok(())
    }

    pub(super) fn flush_memtable(&mut self, id: u32) -> Result<()> {
        let number = self.next_file;
        let Some(plan) = self.cfs.get_mut(&id) else {
            return Ok(());
        };
        let Some(mem) = plan.mem.take() else {
            return Ok(());
        };
        let table_opts = TableOptions::from_options(&plan.options, id);
        let mut garbage = BlobGarbage::new();
        let meta = write_level0_table(
            self.fs.as_ref(),
            self.dir,
            number,
            &mem,
            &table_opts,
            &[],
            &mut garbage,
        )?;
        if let Some(meta) = meta {
            self.next_file += 1;
            plan.tables.push((0, meta));
            self.report.tables_from_wals += 1;
        }
        Ok(())
    }
}
