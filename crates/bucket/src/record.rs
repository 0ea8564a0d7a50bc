//! A log record: what one writer did to the store's files, in order (doc/format.md, "A store in
//! a bucket"). Pure encoding and decoding; nothing here talks to the bucket.

use bytes::Bytes;

const MAGIC: &[u8; 8] = b"STRATALG";
/// Written: 2 (it has `lease` entries), or 3 when it names an absolute object key (a clone's,
/// `/PATH` outside the store's prefix). Read: 1 to 3, so a store an older binary wrote opens; an
/// older binary refuses a newer record as a newer format, not as damage, and never looks for a
/// clone's objects under its own prefix.
const VERSION: u8 = 2;
const VERSION_ABSOLUTE: u8 = 3;
const OLDEST_READ: u8 = 1;

/// One thing that happened to a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// Writer `epoch` (the record's) starts; `writer` tells it from another opener that chose
    /// the same epoch in a race, so a retried PUT can tell its own record from a rival's.
    Claim { writer: String },
    /// `bytes` written at `offset` (past the end zero-fills).
    Append {
        name: String,
        offset: u64,
        bytes: Bytes,
    },
    /// `len` bytes written at `offset`, kept in the object `object` (CRC32C `crc`).
    AppendObject {
        name: String,
        offset: u64,
        len: u64,
        crc: u32,
        object: String,
    },
    /// The file is exactly the object's `len` bytes (CRC32C `crc`).
    Placed {
        name: String,
        len: u64,
        crc: u32,
        object: String,
    },
    /// The file exists with length `len` (cut, or zero-extended).
    Truncate { name: String, len: u64 },
    /// `from` is now called `to`, replacing it.
    Rename { from: String, to: String },
    /// The file is gone.
    Remove { name: String },
    /// The claiming writer's lease, after its `Claim`: a later claim waits this long before it
    /// acknowledges anything, whatever its own lease.
    Lease { millis: u64 },
}

impl Entry {
    fn kind(&self) -> u8 {
        match self {
            Entry::Claim { .. } => 1,
            Entry::Append { .. } => 2,
            Entry::AppendObject { .. } => 3,
            Entry::Placed { .. } => 4,
            Entry::Truncate { .. } => 5,
            Entry::Rename { .. } => 6,
            Entry::Remove { .. } => 7,
            Entry::Lease { .. } => 8,
        }
    }
}

/// A decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub epoch: u64,
    pub entries: Vec<Entry>,
}

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRecord(pub &'static str);

impl Record {
    /// The data objects this record names.
    pub fn objects(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().filter_map(|e| match e {
            Entry::AppendObject { object, .. } | Entry::Placed { object, .. } => {
                Some(object.as_str())
            }
            _ => None,
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(MAGIC);
        let absolute = self.objects().any(|o| o.starts_with('/'));
        out.push(if absolute { VERSION_ABSOLUTE } else { VERSION });
        out.extend_from_slice(&self.epoch.to_le_bytes());
        put_varint(&mut out, self.entries.len() as u64);
        for e in &self.entries {
            out.push(e.kind());
            match e {
                Entry::Claim { writer } => put_lp(&mut out, writer.as_bytes()),
                Entry::Append {
                    name,
                    offset,
                    bytes,
                } => {
                    put_lp(&mut out, name.as_bytes());
                    out.extend_from_slice(&offset.to_le_bytes());
                    put_lp(&mut out, bytes);
                }
                Entry::AppendObject {
                    name,
                    offset,
                    len,
                    crc,
                    object,
                } => {
                    put_lp(&mut out, name.as_bytes());
                    out.extend_from_slice(&offset.to_le_bytes());
                    out.extend_from_slice(&len.to_le_bytes());
                    out.extend_from_slice(&crc.to_le_bytes());
                    put_lp(&mut out, object.as_bytes());
                }
                Entry::Placed {
                    name,
                    len,
                    crc,
                    object,
                } => {
                    put_lp(&mut out, name.as_bytes());
                    out.extend_from_slice(&len.to_le_bytes());
                    out.extend_from_slice(&crc.to_le_bytes());
                    put_lp(&mut out, object.as_bytes());
                }
                Entry::Truncate { name, len } => {
                    put_lp(&mut out, name.as_bytes());
                    out.extend_from_slice(&len.to_le_bytes());
                }
                Entry::Rename { from, to } => {
                    put_lp(&mut out, from.as_bytes());
                    put_lp(&mut out, to.as_bytes());
                }
                Entry::Remove { name } => put_lp(&mut out, name.as_bytes()),
                Entry::Lease { millis } => out.extend_from_slice(&millis.to_le_bytes()),
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    pub fn decode(data: &Bytes) -> Result<Record, BadRecord> {
        if data.len() < MAGIC.len() + 1 + 8 + 1 + 4 {
            return Err(BadRecord("shorter than a record's header"));
        }
        let (body, crc) = data.split_at(data.len() - 4);
        let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        if crc32c::crc32c(body) != stored {
            return Err(BadRecord("checksum mismatch"));
        }
        if &body[..8] != MAGIC {
            return Err(BadRecord("not a Strata log record (bad magic)"));
        }
        if !(OLDEST_READ..=VERSION_ABSOLUTE).contains(&body[8]) {
            return Err(BadRecord(
                "unknown record version (written by a newer Strata, or damaged)",
            ));
        }
        let mut r = Reader {
            data: data.slice(..body.len()),
            pos: 9,
        };
        let epoch = r.u64()?;
        let count = r.varint()?;
        let mut entries = Vec::with_capacity(count.min(1024) as usize);
        for _ in 0..count {
            let e = match r.u8()? {
                1 => Entry::Claim {
                    writer: r.string()?,
                },
                2 => Entry::Append {
                    name: r.string()?,
                    offset: r.u64()?,
                    bytes: r.lp()?,
                },
                3 => Entry::AppendObject {
                    name: r.string()?,
                    offset: r.u64()?,
                    len: r.u64()?,
                    crc: r.u32()?,
                    object: r.string()?,
                },
                4 => Entry::Placed {
                    name: r.string()?,
                    len: r.u64()?,
                    crc: r.u32()?,
                    object: r.string()?,
                },
                5 => Entry::Truncate {
                    name: r.string()?,
                    len: r.u64()?,
                },
                6 => Entry::Rename {
                    from: r.string()?,
                    to: r.string()?,
                },
                7 => Entry::Remove { name: r.string()? },
                8 => Entry::Lease { millis: r.u64()? },
                _ => return Err(BadRecord("unknown entry kind")),
            };
            entries.push(e);
        }
        if r.pos != r.data.len() {
            return Err(BadRecord("bytes after the last entry"));
        }
        Ok(Record { epoch, entries })
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_lp(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

struct Reader {
    data: Bytes,
    pos: usize,
}

impl Reader {
    fn take(&mut self, n: usize) -> Result<Bytes, BadRecord> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or(BadRecord("an entry runs past the record's end"))?;
        let out = self.data.slice(self.pos..end);
        self.pos = end;
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, BadRecord> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, BadRecord> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, BadRecord> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(&b);
        Ok(u64::from_le_bytes(a))
    }

    fn varint(&mut self) -> Result<u64, BadRecord> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(BadRecord("a varint longer than 64 bits"))
    }

    fn lp(&mut self) -> Result<Bytes, BadRecord> {
        let n = self.varint()?;
        let n = usize::try_from(n).map_err(|_| BadRecord("a length past the address space"))?;
        self.take(n)
    }

    fn string(&mut self) -> Result<String, BadRecord> {
        let b = self.lp()?;
        String::from_utf8(b.to_vec()).map_err(|_| BadRecord("a file name that is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn sample() -> Record {
        Record {
            epoch: 7,
            entries: vec![
                Entry::Claim {
                    writer: "host-1-abc".into(),
                },
                Entry::Lease { millis: 5_000 },
                Entry::Append {
                    name: "MANIFEST-000003".into(),
                    offset: 12,
                    bytes: Bytes::from_static(b"edit"),
                },
                Entry::AppendObject {
                    name: "000004.blob".into(),
                    offset: 0,
                    len: 1 << 20,
                    crc: 99,
                    object: "p/data/0000000007/1-000004.blob@0".into(),
                },
                Entry::Placed {
                    name: "000005.sst".into(),
                    len: 4096,
                    crc: 5,
                    object: "p/data/0000000007/2-000005.sst".into(),
                },
                Entry::Truncate {
                    name: "CURRENT.tmp".into(),
                    len: 0,
                },
                Entry::Rename {
                    from: "CURRENT.tmp".into(),
                    to: "CURRENT".into(),
                },
                Entry::Remove {
                    name: "000001.sst".into(),
                },
            ],
        }
    }

    #[test]
    fn records_decode_to_what_was_encoded() {
        let r = sample();
        assert_eq!(Record::decode(&Bytes::from(r.encode())).unwrap(), r);
    }

    #[test]
    fn only_a_record_naming_an_absolute_key_is_version_3() {
        assert_eq!(sample().encode()[8], VERSION);
        let mut clone = sample();
        clone.entries.push(Entry::Placed {
            name: "000009.sst".into(),
            len: 1,
            crc: 2,
            object: "/source/data/0000000001/00000003-000009.sst".into(),
        });
        let bytes = clone.encode();
        assert_eq!(bytes[8], VERSION_ABSOLUTE);
        assert_eq!(Record::decode(&Bytes::from(bytes)).unwrap(), clone);
    }

    #[test]
    fn every_flipped_byte_and_every_cut_is_refused() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(Record::decode(&Bytes::from(bad)).is_err(), "flip at {i}");
        }
        for n in 0..bytes.len() {
            assert!(
                Record::decode(&Bytes::from(bytes[..n].to_vec())).is_err(),
                "cut at {n}"
            );
        }
    }
}
