//! The store's files as the log left them: what replaying its records from the first gives. Pure:
//! the records come in, the files' recipes come out.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::record::{Entry, Record};

/// Where some of a file's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Inline(Bytes),
    Object { key: String, len: u64, crc: u32 },
}

/// One step of rebuilding a file, applied in order to an empty file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The bytes of `source` at `offset`.
    Write { offset: u64, source: Source },
    /// Cut or zero-extend to `len`.
    SetLen(u64),
}

/// A file the log names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileRecipe {
    /// Exactly one object's bytes: fetched when first read.
    Placed { key: String, len: u64, crc: u32 },
    /// Built from its steps.
    Steps(Vec<Step>),
}

impl FileRecipe {
    /// The length of the file it rebuilds.
    pub fn len(&self) -> u64 {
        match self {
            FileRecipe::Placed { len, .. } => *len,
            FileRecipe::Steps(steps) => steps_len(steps),
        }
    }
}

/// The length of the file `steps` build.
pub fn steps_len(steps: &[Step]) -> u64 {
    steps.iter().fold(0, |len, step| match step {
        Step::Write {
            offset,
            source: Source::Inline(b),
        } => len.max(offset + b.len() as u64),
        Step::Write {
            offset,
            source: Source::Object { len: n, .. },
        } => len.max(offset + n),
        Step::SetLen(n) => *n,
    })
}

/// The files, and who wrote last.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Replayed {
    pub files: BTreeMap<String, FileRecipe>,
    /// The newest claim's epoch (0 before any).
    pub epoch: u64,
    /// The newest claim's lease, when it named one.
    pub lease: Option<std::time::Duration>,
    /// Who made the newest claim.
    pub claimer: String,
    /// The highest epoch any record carried.
    pub max_epoch: u64,
    /// The last record's number (0 for an empty log).
    pub last_seq: u64,
}

/// A lease as the log records it (whole milliseconds, rounded up: never shorter).
pub fn lease_millis(lease: std::time::Duration) -> u64 {
    u64::try_from(lease.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

impl Replayed {
    /// Applies record number `seq`.
    pub fn apply(&mut self, seq: u64, record: &Record) {
        self.last_seq = seq;
        self.max_epoch = self.max_epoch.max(record.epoch);
        for e in &record.entries {
            match e {
                Entry::Claim { writer } => {
                    self.epoch = record.epoch;
                    self.claimer = writer.clone();
                    self.lease = None;
                }
                Entry::Lease { millis } => {
                    self.lease = Some(std::time::Duration::from_millis(*millis));
                }
                Entry::Append {
                    name,
                    offset,
                    bytes,
                } => self.push(
                    name,
                    Step::Write {
                        offset: *offset,
                        source: Source::Inline(bytes.clone()),
                    },
                ),
                Entry::AppendObject {
                    name,
                    offset,
                    len,
                    crc,
                    object,
                } => self.push(
                    name,
                    Step::Write {
                        offset: *offset,
                        source: Source::Object {
                            key: object.clone(),
                            len: *len,
                            crc: *crc,
                        },
                    },
                ),
                Entry::Placed {
                    name,
                    len,
                    crc,
                    object,
                } => {
                    self.files.insert(
                        name.clone(),
                        FileRecipe::Placed {
                            key: object.clone(),
                            len: *len,
                            crc: *crc,
                        },
                    );
                }
                Entry::Truncate { name, len } => {
                    if *len == 0 {
                        // Nothing before matters: keep no steps that only get cut away.
                        self.files
                            .insert(name.clone(), FileRecipe::Steps(vec![Step::SetLen(0)]));
                    } else {
                        self.push(name, Step::SetLen(*len));
                    }
                }
                Entry::Rename { from, to } => {
                    if let Some(f) = self.files.remove(from) {
                        self.files.insert(to.clone(), f);
                    }
                }
                Entry::Remove { name } => {
                    self.files.remove(name);
                }
            }
        }
    }

    /// A record that, replayed alone, gives this state: a checkpoint.
    pub fn to_record(&self) -> Record {
        let mut entries = Vec::new();
        if self.epoch != 0 {
            entries.push(Entry::Claim {
                writer: self.claimer.clone(),
            });
            if let Some(lease) = self.lease {
                entries.push(Entry::Lease {
                    millis: lease_millis(lease),
                });
            }
        }
        for (name, recipe) in &self.files {
            match recipe {
                FileRecipe::Placed { key, len, crc } => entries.push(Entry::Placed {
                    name: name.clone(),
                    len: *len,
                    crc: *crc,
                    object: key.clone(),
                }),
                FileRecipe::Steps(steps) => {
                    // Replayed in order these rebuild the steps exactly: an append creates the
                    // file, and a cut to zero only ever comes first.
                    for step in steps {
                        entries.push(match step {
                            Step::Write {
                                offset,
                                source: Source::Inline(bytes),
                            } => Entry::Append {
                                name: name.clone(),
                                offset: *offset,
                                bytes: bytes.clone(),
                            },
                            Step::Write {
                                offset,
                                source: Source::Object { key, len, crc },
                            } => Entry::AppendObject {
                                name: name.clone(),
                                offset: *offset,
                                len: *len,
                                crc: *crc,
                                object: key.clone(),
                            },
                            Step::SetLen(len) => Entry::Truncate {
                                name: name.clone(),
                                len: *len,
                            },
                        });
                    }
                }
            }
        }
        Record {
            epoch: self.max_epoch,
            entries,
        }
    }

    fn push(&mut self, name: &str, step: Step) {
        let recipe = self
            .files
            .entry(name.to_string())
            .or_insert_with(|| FileRecipe::Steps(Vec::new()));
        match recipe {
            FileRecipe::Steps(steps) => steps.push(step),
            FileRecipe::Placed { key, len, crc } => {
                // Written to after it was placed: the object is the base, the step follows.
                let base = Step::Write {
                    offset: 0,
                    source: Source::Object {
                        key: std::mem::take(key),
                        len: *len,
                        crc: *crc,
                    },
                };
                *recipe = FileRecipe::Steps(vec![base, step]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn rec(epoch: u64, entries: Vec<Entry>) -> Record {
        Record { epoch, entries }
    }

    fn append(name: &str, offset: u64, b: &'static [u8]) -> Entry {
        Entry::Append {
            name: name.into(),
            offset,
            bytes: Bytes::from_static(b),
        }
    }

    #[test]
    fn replay_follows_claims_renames_and_removes() {
        let mut r = Replayed::default();
        r.apply(
            1,
            &rec(
                1,
                vec![
                    Entry::Claim { writer: "a".into() },
                    Entry::Lease { millis: 9_000 },
                    Entry::Truncate {
                        name: "CURRENT.tmp".into(),
                        len: 0,
                    },
                    append("CURRENT.tmp", 0, b"MANIFEST-000002\n"),
                    Entry::Rename {
                        from: "CURRENT.tmp".into(),
                        to: "CURRENT".into(),
                    },
                    Entry::Placed {
                        name: "000005.sst".into(),
                        len: 10,
                        crc: 1,
                        object: "data/x".into(),
                    },
                ],
            ),
        );
        r.apply(
            2,
            &rec(
                2,
                vec![
                    Entry::Claim { writer: "b".into() },
                    Entry::Remove {
                        name: "000005.sst".into(),
                    },
                ],
            ),
        );
        assert_eq!((r.epoch, r.max_epoch, r.last_seq), (2, 2, 2));
        // The lease is the newest claim's: b named none.
        assert_eq!(r.lease, None);
        assert_eq!(r.files.keys().collect::<Vec<_>>(), vec!["CURRENT"]);
        let FileRecipe::Steps(steps) = &r.files["CURRENT"] else {
            panic!("CURRENT is built from steps");
        };
        assert_eq!(steps.len(), 2);
    }

    #[test]
    fn a_checkpoint_replays_to_the_state_it_was_taken_of() {
        let mut r = Replayed::default();
        r.apply(
            1,
            &rec(
                3,
                vec![
                    Entry::Claim { writer: "w".into() },
                    Entry::Lease { millis: 1_500 },
                    append("MANIFEST-000002", 0, b"abc"),
                    Entry::Truncate {
                        name: "MANIFEST-000002".into(),
                        len: 2,
                    },
                    Entry::AppendObject {
                        name: "000009.blob".into(),
                        offset: 0,
                        len: 100,
                        crc: 4,
                        object: "data/b".into(),
                    },
                    Entry::Placed {
                        name: "000005.sst".into(),
                        len: 10,
                        crc: 1,
                        object: "data/x".into(),
                    },
                ],
            ),
        );
        let mut again = Replayed::default();
        again.apply(1, &r.to_record());
        assert_eq!(again, r);
        assert_eq!(again.lease, Some(std::time::Duration::from_millis(1_500)));
    }

    #[test]
    fn a_write_after_a_placement_keeps_the_object_as_its_base() {
        let mut r = Replayed::default();
        r.apply(
            1,
            &rec(
                1,
                vec![
                    Entry::Placed {
                        name: "f".into(),
                        len: 3,
                        crc: 9,
                        object: "data/f".into(),
                    },
                    append("f", 3, b"xy"),
                ],
            ),
        );
        let FileRecipe::Steps(steps) = &r.files["f"] else {
            panic!("f is built from steps");
        };
        assert!(
            matches!(&steps[0], Step::Write { offset: 0, source: Source::Object { key, .. } } if key == "data/f")
        );
        assert_eq!(steps.len(), 2);
    }
}
