//! A pinned version of a store: a checkpoint's, a clone's or a backup's body (doc/format.md,
//! "Checkpoints, clones and backups"). Pure encoding and decoding, and the names of pins.

use bytes::Bytes;

use crate::record::{BadRecord, Entry, Record};
use crate::replay::Replayed;

const MAGIC: &[u8; 8] = b"STRATAPN";
const VERSION: u8 = 1;

/// A version of a store: the state after its record `seq`, as one checkpoint record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    /// The store's record the state is as of.
    pub seq: u64,
    /// When the pin was made (Unix milliseconds).
    pub created_millis: u64,
    /// The store the pin is for: the store's URL (a clone's pin: the clone's).
    pub source: String,
    /// A checkpoint record: replayed alone, it rebuilds the store's files.
    pub record: Record,
}

impl Pin {
    /// A pin of `replayed`, made now.
    pub fn of(replayed: &Replayed, source: String) -> Pin {
        Pin {
            seq: replayed.last_seq,
            created_millis: now_millis(),
            source,
            record: replayed.to_record(),
        }
    }

    /// The state the pin holds.
    pub fn replayed(&self) -> Replayed {
        let mut replayed = Replayed::default();
        replayed.apply(self.seq, &self.record);
        replayed
    }

    /// Every data object the pin names, with the length and CRC the record gives it.
    pub fn objects(&self) -> Vec<(String, u64, u32)> {
        let mut objects: Vec<(String, u64, u32)> = self
            .record
            .entries
            .iter()
            .filter_map(|e| match e {
                Entry::AppendObject {
                    object, len, crc, ..
                }
                | Entry::Placed {
                    object, len, crc, ..
                } => Some((object.clone(), *len, *crc)),
                _ => None,
            })
            .collect();
        objects.sort();
        objects.dedup();
        objects
    }

    /// The bytes the pin's objects hold, and the bytes its record carries inline.
    pub fn bytes(&self) -> u64 {
        self.objects().iter().map(|(_, len, _)| len).sum::<u64>()
            + self
                .record
                .entries
                .iter()
                .map(|e| match e {
                    Entry::Append { bytes, .. } => bytes.len() as u64,
                    _ => 0,
                })
                .sum::<u64>()
    }

    /// The pin with every object key passed through `map` (a clone's, a backup's).
    pub fn with_objects(&self, mut map: impl FnMut(&str) -> String) -> Pin {
        let mut pin = self.clone();
        for e in &mut pin.record.entries {
            if let Entry::AppendObject { object, .. } | Entry::Placed { object, .. } = e {
                *object = map(object);
            }
        }
        pin
    }

    /// The record a new store starts from: the pin's files, no writer (epoch 0, no claim), so
    /// the new store's first writer claims it as a fresh one.
    pub fn as_first_record(&self) -> Record {
        Record {
            epoch: 0,
            entries: self
                .record
                .entries
                .iter()
                .filter(|e| !matches!(e, Entry::Claim { .. } | Entry::Lease { .. }))
                .cloned()
                .collect(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let record = self.record.encode();
        let mut out = Vec::with_capacity(64 + record.len() + self.source.len());
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.created_millis.to_le_bytes());
        put_lp(&mut out, self.source.as_bytes());
        put_lp(&mut out, &record);
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    pub fn decode(data: &Bytes) -> Result<Pin, BadRecord> {
        if data.len() < MAGIC.len() + 1 + 16 + 4 {
            return Err(BadRecord("shorter than a pin's header"));
        }
        let (body, crc) = data.split_at(data.len() - 4);
        if crc32c::crc32c(body).to_le_bytes() != crc {
            return Err(BadRecord("checksum mismatch"));
        }
        if &body[..8] != MAGIC {
            return Err(BadRecord("not a Strata pin (bad magic)"));
        }
        if body[8] != VERSION {
            return Err(BadRecord(
                "unknown pin version (written by a newer Strata, or damaged)",
            ));
        }
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&body[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let seq = u64_at(9);
        let created_millis = u64_at(17);
        let mut pos = 25;
        let source = take_lp(body, &mut pos)?;
        let source = String::from_utf8(source.to_vec())
            .map_err(|_| BadRecord("a source that is not UTF-8"))?;
        let record = take_lp(body, &mut pos)?;
        if pos != body.len() {
            return Err(BadRecord("bytes after the pin's record"));
        }
        let record = Record::decode(&data.slice(pos - record.len()..pos))?;
        Ok(Pin {
            seq,
            created_millis,
            source,
            record,
        })
    }
}

fn put_lp(out: &mut Vec<u8>, bytes: &[u8]) {
    let mut n = bytes.len() as u64;
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(bytes);
}

fn take_lp<'a>(body: &'a [u8], pos: &mut usize) -> Result<&'a [u8], BadRecord> {
    let mut len = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *body.get(*pos).ok_or(BadRecord("cut short"))?;
        *pos += 1;
        len |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            let end = usize::try_from(len)
                .ok()
                .and_then(|n| pos.checked_add(n))
                .filter(|&end| end <= body.len())
                .ok_or(BadRecord("a length past the end"))?;
            let bytes = &body[*pos..end];
            *pos = end;
            return Ok(bytes);
        }
    }
    Err(BadRecord("a length of more than 64 bits"))
}

pub fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The object holding checkpoint `name`.
pub fn pin_key(name: &str) -> String {
    format!("pin/{name}")
}

/// The marker of pin `name` while it is being made; each maker's is this and a name of its own
/// (`pinning/NAME@MAKER`: `@` is in no pin's name). A maker of an older version put this itself.
pub fn marker_key(name: &str) -> String {
    format!("pinning/{name}")
}

/// A checkpoint's name: 1 to 128 letters, digits, `-`, `_` and `.`, not starting with `.`.
pub fn check_name(name: &str) -> strata_engine::Result<()> {
    let ok = (1..=128).contains(&name.len())
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(strata_engine::Error::InvalidArgument(format!(
            "{name:?} is not a checkpoint name: 1 to 128 letters, digits, '-', '_' and '.', \
             not starting with '.'"
        )))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn sample() -> Pin {
        let mut replayed = Replayed::default();
        replayed.apply(
            4,
            &Record {
                epoch: 2,
                entries: vec![
                    Entry::Claim { writer: "w".into() },
                    Entry::Placed {
                        name: "000005.sst".into(),
                        len: 4096,
                        crc: 5,
                        object: "data/0000000002/00000001-000005.sst".into(),
                    },
                    Entry::Append {
                        name: "000006.log".into(),
                        offset: 0,
                        bytes: Bytes::from_static(b"wal bytes"),
                    },
                ],
            },
        );
        Pin::of(&replayed, "s3://bucket/p".into())
    }

    #[test]
    fn a_pin_decodes_to_what_was_encoded_and_replays_to_its_state() {
        let pin = sample();
        let back = Pin::decode(&Bytes::from(pin.encode())).unwrap();
        assert_eq!(back, pin);
        assert_eq!(back.replayed().last_seq, 4);
        assert_eq!(back.replayed().files.len(), 2);
        assert_eq!(back.bytes(), 4096 + 9);
    }

    #[test]
    fn every_flipped_byte_and_every_cut_is_refused() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(Pin::decode(&Bytes::from(bad)).is_err(), "flip at {i}");
        }
        for n in 0..bytes.len() {
            assert!(
                Pin::decode(&Bytes::from(bytes[..n].to_vec())).is_err(),
                "cut at {n}"
            );
        }
    }

    #[test]
    fn a_first_record_has_no_writer_and_mapped_keys() {
        let pin = sample().with_objects(|k| format!("/src/{k}"));
        let first = pin.as_first_record();
        assert_eq!(first.epoch, 0);
        assert!(
            !first
                .entries
                .iter()
                .any(|e| matches!(e, Entry::Claim { .. }))
        );
        assert_eq!(
            first.objects().collect::<Vec<_>>(),
            ["/src/data/0000000002/00000001-000005.sst"]
        );
    }

    #[test]
    fn checkpoint_names_are_checked() {
        assert!(check_name("nightly-2026.11.28_a").is_ok());
        for bad in ["", ".hidden", "a/b", "a b", &"x".repeat(129)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
