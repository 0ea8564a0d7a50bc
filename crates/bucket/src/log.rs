//! The writer's end of the store's log: records PUT create-only at the next number, entries that
//! wait for the next record, and the fence (doc/format.md, "A store in a bucket").

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;
use strata_engine::{Error, Result};

use crate::client::{Client, Created};
use crate::record::{Entry, Record};

/// The name of record `seq`.
pub fn log_key(seq: u64) -> String {
    format!("log/{seq:020}")
}

/// The number of the record named `key`, if it is one.
pub fn parse_log_key(key: &str) -> Option<u64> {
    let digits = key.strip_prefix("log/")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Entries larger than this go to an object of their own, named by the record.
pub const INLINE_LIMIT: usize = 64 << 10;

#[derive(Debug)]
struct Tail {
    /// The number the next record takes.
    next_seq: u64,
    /// Entries that ride with the next record.
    pending: Vec<Entry>,
    /// A record whose PUT failed without an answer: it may be in the bucket. It is PUT again
    /// before anything else, so the log never has a gap or a second version of it.
    in_doubt: Option<Bytes>,
    /// Why this writer stopped: set once, for good.
    fenced: Option<String>,
}

/// One writer's log.
#[derive(Debug)]
pub struct Log {
    epoch: u64,
    tail: Mutex<Tail>,
    objects: AtomicU64,
    records: AtomicU64,
}

impl Log {
    /// The log of writer `epoch`, whose claim is record `claim_seq`.
    pub fn new(epoch: u64, claim_seq: u64) -> Log {
        Log {
            epoch,
            tail: Mutex::new(Tail {
                next_seq: claim_seq + 1,
                pending: Vec::new(),
                in_doubt: None,
                fenced: None,
            }),
            objects: AtomicU64::new(0),
            records: AtomicU64::new(0),
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
        format!("data/{:010}/{n:08}-{name}", self.epoch)
    }

    /// `Fenced` if another writer took over.
    pub fn check(&self) -> Result<()> {
        match &self.tail.lock().fenced {
            Some(why) => Err(Error::Fenced(why.clone())),
            None => Ok(()),
        }
    }

    /// Queues `entry` for the next record.
    pub fn defer(&self, entry: Entry) {
        self.tail.lock().pending.push(entry);
    }

    /// Writes the pending entries and `entries` as the next record, and returns once the bucket
    /// holds it. A refused PUT fences this writer.
    pub fn commit(&self, client: &Client, entries: Vec<Entry>) -> Result<()> {
        let mut tail = self.tail.lock();
        if let Some(why) = &tail.fenced {
            return Err(Error::Fenced(why.clone()));
        }
        if let Some(doubt) = tail.in_doubt.clone() {
            self.put(client, &mut tail, doubt)?;
            tail.in_doubt = None;
        }
        let mut all = std::mem::take(&mut tail.pending);
        all.extend(entries);
        if all.is_empty() {
            return Ok(());
        }
        let bytes = Bytes::from(
            Record {
                epoch: self.epoch,
                entries: all,
            }
            .encode(),
        );
        self.put(client, &mut tail, bytes)
    }

    fn put(&self, client: &Client, tail: &mut Tail, bytes: Bytes) -> Result<()> {
        let key = log_key(tail.next_seq);
        match client.put_create(&key, bytes.clone()) {
            Ok(Created::Yes) => {}
            Ok(Created::AlreadyThere) => {
                // Ours, if an earlier try of this very PUT landed and only its answer was lost;
                // anyone else's means a newer writer claimed the store.
                let there = client.get(&key)?;
                if there.as_ref() != Some(&bytes) {
                    let why = format!(
                        "record {} of {} was written by another writer: a newer writer took the \
                         store over from writer epoch {}",
                        tail.next_seq,
                        client.url(),
                        self.epoch
                    );
                    tail.fenced = Some(why.clone());
                    return Err(Error::Fenced(why));
                }
            }
            Err(e) => {
                tail.in_doubt = Some(bytes);
                return Err(e);
            }
        }
        tail.next_seq += 1;
        self.records.fetch_add(1, Ordering::Relaxed);
        Ok(())
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
}
