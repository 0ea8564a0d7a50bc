//! The expected-state file, and the self-describing values it is checked against.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::fatal;

/// No pending write for this key.
pub(super) const NONE: u32 = u32::MAX;
const MAGIC: &[u8; 8] = b"STRESS01";
const HEADER: u64 = 16;

/// The expected-state file: per key, (committed value number, pending value number or NONE).
/// Value number 0 means absent.
pub(super) struct Expected {
    file: File,
    path: PathBuf,
}

impl Expected {
    pub(super) fn open(path: &Path, max_key: u64, create: bool) -> Result<Expected, String> {
        let err = |e: std::io::Error| format!("expected state {}: {e}", path.display());
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)
            .map_err(err)?;
        let len = file.metadata().map_err(err)?.len();
        let want = HEADER + max_key * 8;
        if len == 0 {
            file.write_all_at(MAGIC, 0).map_err(err)?;
            file.write_all_at(&max_key.to_le_bytes(), 8).map_err(err)?;
            // Every key absent, nothing pending.
            let mut slot = [0u8; 8];
            slot[4..].copy_from_slice(&NONE.to_le_bytes());
            let body: Vec<u8> = slot.repeat(max_key as usize);
            file.write_all_at(&body, HEADER).map_err(err)?;
        } else {
            let mut head = [0u8; 16];
            file.read_exact_at(&mut head, 0).map_err(err)?;
            let keys = u64::from_le_bytes(head[8..].try_into().unwrap_or_default());
            if &head[..8] != MAGIC || keys != max_key || len != want {
                return Err(format!(
                    "{} is not an expected-state file for --max_key {max_key} (it has {keys})",
                    path.display()
                ));
            }
        }
        Ok(Expected {
            file,
            path: path.to_path_buf(),
        })
    }

    pub(super) fn get(&self, key: u64) -> (u32, u32) {
        let mut b = [0u8; 8];
        if let Err(e) = self.file.read_exact_at(&mut b, HEADER + key * 8) {
            fatal(&format!("reading {}: {e}", self.path.display()));
        }
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        (word(0), word(4))
    }

    fn write(&self, key: u64, offset: u64, value: u32) {
        if let Err(e) = self
            .file
            .write_all_at(&value.to_le_bytes(), HEADER + key * 8 + offset)
        {
            fatal(&format!("writing {}: {e}", self.path.display()));
        }
    }

    pub(super) fn set_pending(&self, key: u64, value: u32) {
        self.write(key, 4, value);
    }

    pub(super) fn commit(&self, key: u64, value: u32) {
        self.write(key, 0, value);
        self.write(key, 4, NONE);
    }
}

pub(super) fn key_bytes(key: u64) -> Vec<u8> {
    format!("{key:010}").into_bytes()
}

/// Value number `n` of `key`: self-describing, so a read can be checked by its bytes alone.
pub(super) fn value_bytes(key: u64, n: u32, max: usize) -> Vec<u8> {
    let head = format!("{key:010}:{n:08x}:");
    let spread = max.saturating_sub(head.len()).max(1) as u64;
    let len = (key.wrapping_mul(7) + u64::from(n).wrapping_mul(13)) % spread;
    let mut v = head.into_bytes();
    v.extend((0..len).map(|i| b'a' + ((key + u64::from(n) * 3 + i) % 26) as u8));
    v
}

/// The value number `key` holds: 0 when absent, else the number its value carries, provided its
/// bytes are exactly what that number writes.
pub(super) fn stored_number(key: u64, got: Option<&[u8]>, max: usize) -> Result<u32, String> {
    let Some(v) = got else { return Ok(0) };
    v.get(11..19)
        .and_then(|hex| u32::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok())
        .filter(|&n| value_bytes(key, n, max) == v)
        .ok_or_else(|| format!("malformed value {v:?}"))
}
