//! A replica's working copy following the log (`FileSystem::refresh`, called before each of the
//! engine's catch-ups; doc/bucket.md, "Replicas").
//!
//! Invariants:
//! - Only records after the last one applied are fetched: one LIST when nothing is new. When
//!   they are gone (a checkpoint replaced them and garbage collection took them), the log is
//!   replayed from its checkpoint instead.
//! - The reader's lease moves to the new version before the working copy does (`move_to`:
//!   marker, listing, pin, then the old pin goes), so garbage collection keeps every object of
//!   the version the engine is about to read.
//! - A file the log only appended to is appended to in place; any other change rebuilds it
//!   beside and renames it over, so the engine never reads a half-made file.
//! - A file the new version no longer names stays in the working copy, and in the reader's pin,
//!   until the engine no longer reads it (a refresh's `reading`: no read, iterator or snapshot
//!   holds a version that names it); WAL and MANIFEST files, which only a catch-up reads, go
//!   at the next refresh. Nothing the current version names is ever deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::path::Path;

use parking_lot::Mutex;
use strata_engine::{Error, Result};

use crate::cache::Remote;
use crate::client::Client;
use crate::local_io::io;
use crate::log::{log_key, parse_log_key};
use crate::record::Record;
use crate::replay::{FileRecipe, Replayed, steps_len};
use crate::shared::Shared;

/// Records fetched at once when catching up.
const BATCH: usize = 64;

/// Whether a store's working copy may follow the log.
#[derive(Debug)]
pub(crate) enum Following {
    /// A writer's: its files are its own.
    Never,
    /// A checkpoint's, which never changes: a replica of it would never move, and says so
    /// rather than look healthy. The checkpoint's name.
    Pinned(String),
    /// A read-only open in a writer's working copy: following would overwrite the WAL bytes
    /// only that writer holds. Why, for the replica to report.
    Refused(String),
    Log(Follow),
}

/// What a read-only open keeps to follow the log.
#[derive(Debug)]
pub(crate) struct Follow {
    /// The version the working copy matches.
    view: Mutex<Replayed>,
    /// Files the log dropped that are still in the working copy, with what they were: pinned
    /// with the version until the engine stops reading them.
    dropped: Mutex<BTreeMap<String, FileRecipe>>,
}

impl Follow {
    pub(crate) fn new(view: Replayed) -> Follow {
        Follow {
            view: Mutex::new(view),
            dropped: Mutex::new(BTreeMap::new()),
        }
    }

    /// Brings the working copy up to the log's newest record; whether anything changed.
    /// `reading`: the files the engine may still open (`FileSystem::refresh`).
    pub(crate) fn refresh(&self, s: &Shared, reading: &BTreeSet<String>) -> Result<bool> {
        let mut view = self.view.lock();
        self.sweep(s, &view, reading);
        // A lease that lapsed (the bucket took no renewal for its whole time) may have let
        // garbage collection take what it pinned: pinned again now, at the log's head, whose
        // every object the log itself still reaches.
        let lapsed = s.reader_lease.as_ref().is_some_and(|l| l.has_lapsed());
        if newer_records(&s.client, view.last_seq)?.is_empty() && !lapsed {
            return Ok(false);
        }
        let next = match &s.reader_lease {
            Some(lease) => lease.move_to(&s.client, || {
                let next = replay_after(&s.client, &view)?;
                // The pin holds what the engine may still read: the new version, and what the
                // working copy keeps of older ones (those this refresh drops included).
                let mut pinned = next.clone();
                for (name, recipe) in self.dropped.lock().iter().chain(&view.files) {
                    pinned
                        .files
                        .entry(name.clone())
                        .or_insert_with(|| recipe.clone());
                }
                Ok((pinned, next))
            })?,
            None => replay_after(&s.client, &view)?,
        };
        if next.last_seq <= view.last_seq {
            return Ok(false);
        }
        apply(s, &view, &next)?;
        let gone = view
            .files
            .iter()
            .filter(|(name, _)| !next.files.contains_key(*name))
            .map(|(name, recipe)| (name.clone(), recipe.clone()));
        self.dropped.lock().extend(gone);
        *view = next;
        Ok(true)
    }

    /// Deletes the working copy's files the log dropped and the engine no longer reads; one the
    /// log named again since is its own again.
    fn sweep(&self, s: &Shared, view: &Replayed, reading: &BTreeSet<String>) {
        self.dropped.lock().retain(|name, _| {
            if view.files.contains_key(name) {
                return false;
            }
            if reading.contains(name) {
                return true;
            }
            s.cache.forget(name);
            // Only the cache's copy (and one half fetched): the bucket holds what the log named.
            let path = s.root.join(name);
            let (partial, pages) = crate::paged::partial_paths(&path);
            for file in [path, partial, pages] {
                let _ = std::fs::remove_file(file);
            }
            false
        });
    }
}

/// The record numbers after `last` in the bucket, in order.
fn newer_records(client: &Client, last: u64) -> Result<Vec<u64>> {
    Ok(client
        .list_after("log/", &log_key(last))?
        .iter()
        .filter_map(|k| parse_log_key(k))
        .collect())
}

/// `prev` with every record after it applied; the whole log replayed again when the records
/// right after it are gone.
fn replay_after(client: &Client, prev: &Replayed) -> Result<Replayed> {
    let seqs = newer_records(client, prev.last_seq)?;
    let contiguous = seqs
        .iter()
        .zip(prev.last_seq + 1..)
        .all(|(&seq, expected)| seq == expected);
    if !contiguous {
        return Ok(crate::open::replay(client)?.replayed);
    }
    let mut next = prev.clone();
    for batch in seqs.chunks(BATCH) {
        let keys: Vec<String> = batch.iter().map(|&seq| log_key(seq)).collect();
        for ((&seq, key), bytes) in batch.iter().zip(&keys).zip(client.get_many(&keys)?) {
            let corrupt = |detail: String| Error::Corruption {
                file: client.object(key).into(),
                detail,
            };
            let Some(bytes) = bytes else {
                // Listed, then collected: a checkpoint holds it now.
                return Ok(crate::open::replay(client)?.replayed);
            };
            let record = Record::decode(&bytes).map_err(|e| corrupt(e.0.into()))?;
            next.apply(seq, &record);
        }
    }
    Ok(next)
}

/// Makes the working copy at `s.root`, which matches `old`, match `new`.
fn apply(s: &Shared, old: &Replayed, new: &Replayed) -> Result<()> {
    for (name, recipe) in &new.files {
        let before = old.files.get(name);
        if before == Some(recipe) {
            continue;
        }
        let path = s.root.join(name);
        match recipe {
            FileRecipe::Placed { .. } => {
                let Some(remote) = Remote::of(recipe) else {
                    continue;
                };
                // Fetched when first read; a copy under this name is another file's.
                remove_if_there(&path)?;
                s.cache.expect(name, remote);
            }
            FileRecipe::Steps(steps) => {
                s.cache.forget(name);
                match before {
                    Some(FileRecipe::Steps(done))
                        if steps.starts_with(done) && len_of(&path) == Some(steps_len(done)) =>
                    {
                        let file = OpenOptions::new()
                            .write(true)
                            .open(&path)
                            .map_err(io(format!("opening {}", path.display())))?;
                        crate::working_copy::apply_steps(
                            &s.client,
                            &file,
                            &path,
                            &steps[done.len()..],
                        )?;
                    }
                    _ => crate::working_copy::rebuild(&s.client, &path, steps)?,
                }
            }
        }
    }
    Ok(())
}

fn len_of(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.len())
}

fn remove_if_there(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(io(format!("removing {}", path.display()))(e))
        }
        _ => Ok(()),
    }
}
