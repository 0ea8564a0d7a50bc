//! Blob garbage collection inside a compaction: values that live in the oldest blob files are
//! copied into one new file as their entries pass through, so the old files empty out.
//!
//! A whole-blob index moves whole. An extent list (doc/format.md "Extent values") moves the
//! pieces that lie in a file being collected: each becomes a record of the new file that this
//! entry made, and the rest of the list is kept and borrowed. For the accounting the entry is
//! dropped and written again: every record the old list named is garbage once (as a dropped
//! entry's are), and every record the new list keeps from elsewhere is borrowed (counted with
//! the compaction's edit, as a flush counts its memtable's).
//!
//! A chunked value over `MOVED_WHOLE` is read and written a step at a time (each step's chunks
//! verified as read); the record it becomes is raw chunks even in a compressing column family,
//! as compressed chunks need their table ahead of them, which only the whole value gives.

use super::job::Outputs;
use crate::blob::extents::{Extent, Piece};
use crate::blob::{BlobFileWriter, BlobIndex, BlobRef, Owner, encode_blob};
use crate::error::Result;

/// Values (and pieces of extent lists) up to this size move in memory, compressed again when the
/// file compresses; larger ones move a step (1 MiB) at a time, as raw chunks, so that the memory
/// a compaction holds does not grow with the values it moves.
const MOVED_WHOLE: u64 = 8 << 20;

impl Outputs<'_, '_> {
    /// Whether blob file `file` is being collected.
    fn collects(&self, file: u64) -> bool {
        self.ctx.blobs.gc_files.binary_search(&file).is_ok()
    }

    /// The new value of an entry of `key` whose blob index is `index` (its bytes `raw`), when
    /// garbage collection moves any of it; `None` when it stays as it is.
    pub(super) fn relocate_index(
        &mut self,
        key: &[u8],
        index: &BlobIndex<'_>,
        raw: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        match index {
            BlobIndex::Blob { blob, .. } if self.collects(blob.file) => {
                self.relocate(key, index, *blob).map(Some)
            }
            BlobIndex::Extents { .. } => self.relocate_extents(key, raw),
            _ => Ok(None),
        }
    }

    /// Moves the value of `key` out of an old blob file into this job's; returns the new index.
    fn relocate(&mut self, key: &[u8], index: &BlobIndex<'_>, blob: BlobRef) -> Result<Vec<u8>> {
        let store = self.ctx.blobs.store;
        let expiration = index.expiration();
        let moved = match blob.stored.is_chunked() {
            true => {
                let reader = store.reader(blob.file, key)?;
                let value_len = reader.value_len(blob, key)?;
                self.write_moved(key, value_len, expiration, true, |(at, len)| {
                    let (_, bytes) = reader.read_range(blob, Owner::Key(key), (at, len), None)?;
                    Ok(bytes)
                })?
            }
            // A record that can only be verified whole (at most a chunk, or from before
            // chunked records) moves whole.
            false => {
                let value = store.fetch(blob, key, false)?;
                self.write_relocated(key, &value, expiration)?
            }
        };
        *self.done.blob_garbage.entry(blob.file).or_default() += blob.size;
        self.done.blob_relocated_keys += 1;
        self.done.blob_relocated_from.insert(blob.file);
        Ok(encode_blob(expiration, moved))
    }

    /// Writes a moved value of `value_len` bytes that `read` returns by range: whole (compressed
    /// again when the file compresses) up to `MOVED_WHOLE`, a step at a time past it when
    /// `streamable`. A record verified only whole is not: each step would read it whole again.
    fn write_moved(
        &mut self,
        key: &[u8],
        value_len: u64,
        expiration: u64,
        streamable: bool,
        mut read: impl FnMut((u64, u64)) -> Result<Vec<u8>>,
    ) -> Result<BlobRef> {
        if value_len <= MOVED_WHOLE || !streamable {
            let value = read((0, value_len))?;
            return self.write_relocated(key, &value, expiration);
        }
        let moved = self
            .blob_writer()?
            .add_streamed(key, value_len, expiration, |at, len| read((at, len)))?;
        self.done.blob_relocated_bytes += moved.size;
        Ok(moved)
    }

    /// The file garbage collection writes, opened on first use.
    fn blob_writer(&mut self) -> Result<&mut BlobFileWriter> {
        Ok(match self.blob_writer {
            Some(ref mut w) => w,
            None => self.blob_writer.insert((self.ctx.blobs.new_blob_file)()?),
        })
    }

    /// Appends `value` of `key` to the file garbage collection writes, opening it first.
    fn write_relocated(&mut self, key: &[u8], value: &[u8], expiration: u64) -> Result<BlobRef> {
        let moved = self.blob_writer()?.add(key, value, expiration)?;
        self.done.blob_relocated_bytes += moved.size;
        Ok(moved)
    }

    /// The extent list `raw` of `key` with the pieces in collected files moved into this job's
    /// file; `None` when none lies in one.
    fn relocate_extents(&mut self, key: &[u8], raw: &[u8]) -> Result<Option<Vec<u8>>> {
        let store = self.ctx.blobs.store;
        let mut x = store.decode_extents(raw, key)?;
        let records = x.records();
        if !records.iter().any(|(b, _)| self.collects(b.file)) {
            return Ok(None);
        }
        let key_len = u32::try_from(key.len()).unwrap_or(u32::MAX);
        x.borrow_all();
        let mut moved_from = Vec::new();
        for e in &mut x.list {
            let Piece::Record {
                blob,
                key_len: owner_len,
                at,
                ..
            } = e.piece
            else {
                continue;
            };
            if !self.collects(blob.file) {
                continue;
            }
            let read =
                |(from, len)| store.read_record_bytes(blob, owner_len, (at + from, len), key);
            let streamable = blob.stored.is_chunked();
            let moved = self.write_moved(key, e.len, x.expiration, streamable, read)?;
            *e = Extent::record(moved, key_len, e.len, true);
            moved_from.push(blob.file);
        }
        x.normalize();
        // The old entry is gone: each record it named is garbage once.
        for (blob, _) in &records {
            *self.done.blob_garbage.entry(blob.file).or_default() += blob.size;
        }
        // The new one borrows what it kept.
        self.done.blob_borrowed.extend(x.borrowed());
        self.done.blob_relocated_keys += 1;
        self.done.blob_relocated_from.extend(moved_from);
        Ok(Some(x.encode()))
    }

    /// Seals the garbage collection's blob file, if one was written.
    pub(super) fn finish_blob_file(&mut self) -> Result<()> {
        if let Some(w) = self.blob_writer.take() {
            let number = w.number;
            let (footer, size) = w.finish()?;
            self.done.blob_files.push((number, footer, size));
        }
        Ok(())
    }
}
