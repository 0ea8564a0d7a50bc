//! The writer's end of the store's log: records PUT create-only at the next number, entries that
//! wait for the next record, and the fence (doc/format.md, "A store in a bucket").

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use strata_engine::{Error, Result};

use crate::client::Client;
use crate::record::{Entry, Record};
use crate::replay::Replayed;

/// The name of record `seq`.
pub fn log_key(seq: u64) -> String {
    format!("log/{seq:020}")
}

/// The newest record numbered `from` or later in the bucket, if any (one LIST).
fn newest_record_from(client: &Client, from: u64) -> Result<Option<u64>> {
    let after = log_key(from.saturating_sub(1));
    Ok(client
        .list_after("log/", &after)?
        .iter()
        .filter_map(|k| parse_log_key(k))
        .filter(|&s| s >= from)
        .max())
}

/// Whether the records a confirmation found from `next` on (`newest`, the newest of them) are
/// all this writer's: each below its tail as it stands after the LIST (records it wrote while
/// the LIST ran), or, alone at `next`, its record in doubt. A newer writer's claim is always
/// numbered at or past this writer's tail, so a record there is never ours.
fn all_ours(newest: Option<u64>, next: u64, tail_now: u64, doubt_is_at_next: bool) -> bool {
    match newest {
        None => true,
        Some(n) => n < tail_now || (n == next && doubt_is_at_next),
    }
}

/// The name of the checkpoint taken after record `seq`.
pub fn checkpoint_key(seq: u64) -> String {
    format!("checkpoint/{seq:020}")
}

/// The number of the record named `key`, if it is one.
pub fn parse_log_key(key: &str) -> Option<u64> {
    parse_numbered(key, "log/")
}

/// The record number of the checkpoint named `key`, if it is one.
pub fn parse_checkpoint_key(key: &str) -> Option<u64> {
    parse_numbered(key, "checkpoint/")
}

/// The number of the object `key` named `DIR/` and 20 digits (a record, a log checkpoint, a
/// backup).
pub(crate) fn parse_numbered(key: &str, dir: &str) -> Option<u64> {
    let digits = key.strip_prefix(dir)?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// A checkpoint is written after at least this many records, so an open replays about as many
/// (more while records are small beside the state, up to `CHECKPOINT_CAP`).
pub const CHECKPOINT_EVERY: u64 = 64;
/// The most records between two checkpoints, however small.
pub const CHECKPOINT_CAP: u64 = 1024;

/// Entries larger than this go to an object of their own, named by the record.
pub const INLINE_LIMIT: usize = 64 << 10;

#[derive(Debug)]
struct Tail {
    /// The number the next record takes.
    next_seq: u64,
    /// A record whose PUT failed without an answer: it may be in the bucket. It is PUT again
    /// before anything else, so the log never has a gap or a second version of it. With the
    /// ticket of its last entry.
    in_doubt: Option<(Record, u64)>,
    /// Every entry up to this ticket is in a record that landed.
    landed: u64,
    /// Why this writer stopped: set once, for good.
    fenced: Option<String>,
    /// The store's files as of the last record.
    state: Replayed,
    /// Records since the last checkpoint, and their bytes.
    since_checkpoint: u64,
    bytes_since_checkpoint: u64,
    /// The size of the last checkpoint written (0 before any).
    checkpoint_bytes: u64,
    /// The checkpoints in the bucket, oldest first.
    checkpoints: Vec<u64>,
    /// Records below this number are deleted (or never were).
    kept_from: u64,
    /// A checkpoint is due or being written (without the tail held): one at a time.
    checkpointing: bool,
    /// The checkpoint due, taken after a record landed, for `write_due_checkpoint`.
    due: Option<CheckpointJob>,
}

/// A checkpoint due after a record landed: taken under the tail, written without it.
#[derive(Debug)]
struct CheckpointJob {
    seq: u64,
    bytes: Bytes,
    /// The records since the last checkpoint, and their bytes, that this one covers.
    covers: (u64, u64),
}

/// Entries waiting for the next record. Its lock is never held across a request, so queuing
/// an entry never waits on a record's PUT.
#[derive(Debug, Default)]
struct Queue {
    entries: Vec<Entry>,
    /// Entries ever queued: the ticket of the newest.
    queued: u64,
}

/// The log as an open found it.
#[derive(Debug, Default)]
pub struct LogView {
    pub replayed: Replayed,
    /// The checkpoints in the bucket, oldest first.
    pub checkpoints: Vec<u64>,
    /// The oldest record in the bucket.
    pub first_record: u64,
}

/// One writer's log.
#[derive(Debug)]
pub struct Log {
    epoch: u64,
    /// Held across a record's PUT: records are numbered, so they go one at a time. Lock order:
    /// `tail`, then `queue`.
    tail: Mutex<Tail>,
    queue: Mutex<Queue>,
    /// Set with `Tail::fenced`, read without its lock (every append checks it, and the tail is
    /// held across PUTs).
    fenced: AtomicBool,
    /// Data objects named and not yet in a committed record: garbage collection spares them.
    uploading: Mutex<BTreeSet<String>>,
    /// When the bucket last showed this writer still the newest (a record of its own landed, or
    /// the next record's name was free).
    confirmed: Mutex<Instant>,
    lease: Duration,
    /// When a WAL append last asked the bucket (`may_ask`).
    append_asked: Mutex<Option<Instant>>,
    objects: AtomicU64,
    records: AtomicU64,
}

impl Log {
    /// The log of writer `epoch`, whose claim `claim` is record `claim_seq`, after `view`.
    /// `lease`: after this long (half of it) without the bucket showing this writer the
    /// newest, a record that lands is checked against newer ones before it counts.
    pub fn new(epoch: u64, claim_seq: u64, claim: &Record, view: LogView, lease: Duration) -> Log {
        let mut state = view.replayed;
        let since_checkpoint = claim_seq - view.checkpoints.last().copied().unwrap_or(0);
        state.apply(claim_seq, claim);
        Log {
            epoch,
            tail: Mutex::new(Tail {
                next_seq: claim_seq + 1,
                in_doubt: None,
                landed: 0,
                fenced: None,
                state,
                since_checkpoint,
                bytes_since_checkpoint: 0,
                checkpoint_bytes: 0,
                checkpoints: view.checkpoints,
                kept_from: view.first_record,
                checkpointing: false,
                due: None,
            }),
            queue: Mutex::new(Queue::default()),
            objects: AtomicU64::new(0),
            records: AtomicU64::new(0),
            fenced: AtomicBool::new(false),
            uploading: Mutex::new(BTreeSet::new()),
            confirmed: Mutex::new(Instant::now()),
            append_asked: Mutex::new(None),
            lease,
        }
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Records this writer has added.
    pub fn records_written(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }

    /// A fresh name for a data object (unique: the epoch is this writer's alone).
    pub fn data_key(&self, name: &str) -> String {
        let n = self.objects.fetch_add(1, Ordering::Relaxed);
        let key = format!("data/{:010}/{n:08}-{name}", self.epoch);
        self.uploading.lock().insert(key.clone());
        key
    }

    /// `Fenced` if another writer took over.
    pub fn check(&self) -> Result<()> {
        if !self.fenced.load(Ordering::Acquire) {
            return Ok(());
        }
        let why = self.tail.lock().fenced.clone().unwrap_or_default();
        Err(Error::Fenced(why))
    }

    /// Asks the bucket whether a newer writer has claimed the store since this one's last
    /// record (the next record's name is taken); fences this writer if so.
    pub fn confirm(&self, client: &Client) -> Result<()> {
        self.check()?;
        let (next, doubt) = {
            let tail = self.tail.lock();
            let doubt = tail.in_doubt.as_ref().map(|(r, _)| Bytes::from(r.encode()));
            (tail.next_seq, doubt)
        };
        let asked = Instant::now();
        // Any record at or past `next`, not only `next` itself: a newer writer's claim there
        // may have been deleted since (below its checkpoints), but its newest record never is.
        let newest = newest_record_from(client, next)?;
        let tail_now = self.tail.lock().next_seq;
        // A record at `next` may be this writer's own in doubt (its PUT's answer was lost).
        let doubt_is_at_next = newest == Some(next)
            && tail_now == next
            && doubt.is_some()
            && client.get(&log_key(next))? == doubt;
        let ours = all_ours(newest, next, tail_now, doubt_is_at_next);
        if ours {
            *self.confirmed.lock() = asked;
        } else {
            let newest = newest.unwrap_or(next);
            let why = format!(
                "record {newest} of {} exists and is not this writer's: a newer writer took the \
                 store over from writer epoch {}",
                client.url(),
                self.epoch
            );
            self.fence(&mut self.tail.lock(), why.clone());
            return Err(Error::Fenced(why));
        }
        Ok(())
    }

    /// Whether an append may ask the bucket now: at most once per `every` (an outage must not
    /// turn every write into a request); notes the asking.
    pub fn may_ask(&self, every: Duration) -> bool {
        let mut last = self.append_asked.lock();
        if last.is_some_and(|t| t.elapsed() < every) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }

    /// After an append's asking found no bucket: no append asks again for `pause` (each try
    /// could wait out the client's retries under the engine's WAL lock).
    pub fn asking_failed(&self, pause: Duration) {
        *self.append_asked.lock() = Some(Instant::now() + pause);
    }

    /// How long ago the bucket last showed this writer the newest.
    pub fn since_confirmed(&self) -> std::time::Duration {
        self.confirmed.lock().elapsed()
    }

    fn fence(&self, tail: &mut Tail, why: String) {
        tail.fenced = Some(why);
        self.fenced.store(true, Ordering::Release);
    }

    /// The data objects waiting in queued (or in-doubt) entries: uploaded, named by no record
    /// yet, and not garbage.
    pub fn waiting_objects(&self) -> Vec<String> {
        let tail = self.tail.lock();
        let queued = Record {
            epoch: self.epoch,
            entries: self.queue.lock().entries.clone(),
        };
        let mut out: Vec<String> = queued.objects().map(str::to_string).collect();
        if let Some((doubt, _)) = &tail.in_doubt {
            out.extend(doubt.objects().map(str::to_string));
        }
        drop(tail);
        out.extend(self.uploading.lock().iter().cloned());
        out
    }

    /// Entries waiting for the next record (those of a record in doubt included, unless a
    /// record is being written: the stats never wait on the bucket).
    pub fn queued(&self) -> u64 {
        // With the tail held, no entry is between the queue and a record.
        let tail = self.tail.try_lock();
        let in_doubt = tail
            .as_ref()
            .and_then(|t| t.in_doubt.as_ref().map(|(r, _)| r.entries.len()))
            .unwrap_or(0);
        (self.queue.lock().entries.len() + in_doubt) as u64
    }

    /// Queues `entries` for the next record; returns the ticket of the last, for
    /// [`Log::commit`].
    pub fn enqueue(&self, entries: impl IntoIterator<Item = Entry>) -> u64 {
        let mut queue = self.queue.lock();
        for entry in entries {
            queue.entries.push(entry);
            queue.queued += 1;
        }
        queue.queued
    }

    /// Queues `entry` for the next record.
    pub fn defer(&self, entry: Entry) {
        self.enqueue([entry]);
    }

    /// Returns once the bucket holds a record with every entry queued up to `ticket`: the
    /// first caller to get the tail writes every queued entry as the next record, and callers
    /// that waited meanwhile find theirs landed. A refused PUT fences this writer. Called again
    /// with the same ticket after a failure, it settles the record in doubt first.
    pub fn commit(&self, client: &Client, ticket: u64) -> Result<()> {
        let mut tail = self.tail.lock();
        // Landed before any fence: a newer writer's claim comes after it.
        if tail.landed >= ticket {
            return Ok(());
        }
        if let Some(why) = &tail.fenced {
            return Err(Error::Fenced(why.clone()));
        }
        if let Some((doubt, upto)) = tail.in_doubt.take() {
            self.land(client, &mut tail, doubt, upto, true)?;
            if tail.landed >= ticket {
                return Ok(());
            }
        }
        let (all, upto) = {
            let mut queue = self.queue.lock();
            (std::mem::take(&mut queue.entries), queue.queued)
        };
        if all.is_empty() {
            // Whatever was queued up to `upto` is in records that landed: nothing is in doubt,
            // and no other record is being written while this caller holds the tail.
            tail.landed = upto;
            return Ok(());
        }
        let record = Record {
            epoch: self.epoch,
            entries: all,
        };
        self.land(client, &mut tail, record, upto, false)
    }

    /// PUTs `record` (whose last entry has ticket `upto`) as the next one. A failure leaves it
    /// in doubt, unless the writer was fenced: it may be in the bucket, so it is PUT again, as
    /// is, before anything else. `retry`: as for [`Log::put`].
    fn land(
        &self,
        client: &Client,
        tail: &mut Tail,
        record: Record,
        upto: u64,
        retry: bool,
    ) -> Result<()> {
        if let Err(e) = self.put(client, tail, record.clone(), retry) {
            if tail.fenced.is_none() {
                tail.in_doubt = Some((record, upto));
            }
            return Err(e);
        }
        tail.landed = upto;
        Self::note_checkpoint_due(tail);
        Ok(())
    }

    /// PUTs `record` as the next one. `retry`: it was in doubt, so finding it there proves
    /// nothing about now (it may have landed before a newer writer's claim).
    fn put(&self, client: &Client, tail: &mut Tail, record: Record, retry: bool) -> Result<()> {
        let key = log_key(tail.next_seq);
        let asked = Instant::now();
        let stale = retry || self.since_confirmed() >= self.lease / 2;
        let bytes = Bytes::from(record.encode());
        // Anyone else's record under the name means a newer writer claimed the store.
        if !client.put_create_or_own(&key, bytes.clone())? {
            let why = format!(
                "record {} of {} was written by another writer: a newer writer took the store \
                 over from writer epoch {}",
                tail.next_seq,
                client.url(),
                self.epoch
            );
            self.fence(tail, why.clone());
            return Err(Error::Fenced(why));
        }
        // After a pause longer than half a lease, or for a record in doubt, a record landing
        // proves little: a newer writer may have claimed the next number (and deleted the claim
        // under a checkpoint since). Its newest record would still be there, past this one.
        if stale && let Some(newer) = newest_record_from(client, tail.next_seq + 1)? {
            // Whether the newer writer's history holds this record (it landed before that
            // writer's claim) cannot be told from here: a record in doubt may count.
            let may_count = if retry {
                format!(
                    "; record {} of this writer, sent earlier without an answer, may be in its \
                     history, so the writes it carried may still appear",
                    tail.next_seq
                )
            } else {
                String::new()
            };
            let why = format!(
                "record {newer} of {} was written by a newer writer while this one (writer epoch \
                 {}) was paused{may_count}",
                client.url(),
                self.epoch
            );
            self.fence(tail, why.clone());
            return Err(Error::Fenced(why));
        }
        *self.confirmed.lock() = asked;
        let seq = tail.next_seq;
        let mut uploading = self.uploading.lock();
        for object in record.objects() {
            uploading.remove(object);
        }
        drop(uploading);
        tail.state.apply(seq, &record);
        tail.next_seq += 1;
        tail.since_checkpoint += 1;
        tail.bytes_since_checkpoint += bytes.len() as u64;
        self.records.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Every `CHECKPOINT_EVERY` records: the state as of the newest record, to be written as
    /// one object by [`Log::write_due_checkpoint`], unless one is due or being written already.
    fn note_checkpoint_due(tail: &mut Tail) {
        // A checkpoint carries the whole state (a live WAL's bytes too, at `bucket`
        // durability): written only once the records since the last one hold as many bytes, so
        // checkpoints upload at most about as much as the records did, never that much per 64
        // records. A store of many small records still checkpoints every `CHECKPOINT_CAP`.
        let due = tail.since_checkpoint >= CHECKPOINT_EVERY
            && (tail.bytes_since_checkpoint >= tail.checkpoint_bytes
                || tail.since_checkpoint >= CHECKPOINT_CAP);
        if !due || tail.checkpointing {
            return;
        }
        tail.checkpointing = true;
        tail.due = Some(CheckpointJob {
            seq: tail.next_seq - 1,
            bytes: Bytes::from(tail.state.to_record().encode()),
            covers: (tail.since_checkpoint, tail.bytes_since_checkpoint),
        });
    }

    /// Writes the checkpoint due, if any, without the tail held: called by committers once
    /// they hold none of the log's locks (nor the WAL order), so the next record does not wait
    /// for it; a caller's own locks (the engine's WAL lock) still do. A fenced writer drops it.
    pub fn write_due_checkpoint(&self, client: &Client) {
        let mut tail = self.tail.lock();
        let Some(job) = tail.due.take() else {
            return;
        };
        if tail.fenced.is_none() {
            drop(tail);
            self.write_checkpoint(client, job);
            tail = self.tail.lock();
        }
        tail.checkpointing = false;
    }

    /// Writes `job`'s checkpoint (its caller holds `checkpointing`), then deletes the records
    /// and checkpoints older than the previous checkpoint (an open that listed the previous one
    /// can still read everything after it). The tail is not held across either request, so
    /// records go on meanwhile. A failure here fails no write: a later record tries again.
    fn write_checkpoint(&self, client: &Client, job: CheckpointJob) {
        let size = job.bytes.len() as u64;
        let written = client.put_create(&checkpoint_key(job.seq), job.bytes);
        let mut tail = self.tail.lock();
        if let Err(e) = written {
            log::warn!("{}: checkpoint {} not written: {e}", client.url(), job.seq);
            return;
        }
        // Records that landed while it was written count toward the next one.
        tail.since_checkpoint -= job.covers.0;
        tail.bytes_since_checkpoint -= job.covers.1;
        tail.checkpoint_bytes = size;
        tail.checkpoints.push(job.seq);
        let n = tail.checkpoints.len();
        if n < 2 {
            return;
        }
        let floor = tail.checkpoints[n - 2];
        let mut doomed: Vec<String> = (tail.kept_from..floor).map(log_key).collect();
        doomed.extend(tail.checkpoints[..n - 2].iter().map(|&c| checkpoint_key(c)));
        drop(tail);
        let deleted = client.delete_many(doomed);
        let mut tail = self.tail.lock();
        // No other checkpoint was pushed meanwhile: `checkpointing` kept them out.
        match deleted {
            Ok(()) => {
                tail.kept_from = tail.kept_from.max(floor);
                tail.checkpoints.drain(..n - 2);
            }
            Err(e) => log::warn!("{}: old records not deleted: {e}", client.url()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn log_keys_sort_in_record_order_and_parse_back() {
        let mut keys: Vec<String> = [10u64, 9, 100, 1].iter().map(|&s| log_key(s)).collect();
        keys.sort();
        let seqs: Vec<u64> = keys.iter().map(|k| parse_log_key(k).unwrap()).collect();
        assert_eq!(seqs, vec![1, 9, 10, 100]);
        assert_eq!(parse_log_key("log/12"), None);
        assert_eq!(parse_log_key("data/00000000000000000001"), None);
    }

    #[test]
    fn a_confirmation_sees_a_newer_writers_claim_behind_its_own_records() {
        // Nothing from `next` on, or only records this writer landed while the LIST ran.
        assert!(all_ours(None, 10, 10, false));
        assert!(all_ours(Some(10), 10, 11, false));
        assert!(all_ours(Some(12), 10, 13, false));
        // A claim past the records it landed meanwhile: the first found (10) is its own, the
        // newest (11) is not.
        assert!(!all_ours(Some(11), 10, 11, false));
        // Its record in doubt at `next` is its own, but not a claim after it.
        assert!(all_ours(Some(10), 10, 10, true));
        assert!(!all_ours(Some(11), 10, 10, true));
        assert!(!all_ours(Some(10), 10, 10, false));
    }
}
