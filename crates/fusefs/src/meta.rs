//! The metadata record: what a file's bytes cannot hold (kind, mode, owner, times, symlink
//! target, device number, user xattrs), kept in the metadata column family. See `doc/fuse.md`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What an entry is. A regular file's bytes live in the data column family; every other kind is
/// this record alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File = 1,
    Dir = 2,
    Symlink = 3,
    Fifo = 4,
    Socket = 5,
    CharDevice = 6,
    BlockDevice = 7,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::File,
            2 => Kind::Dir,
            3 => Kind::Symlink,
            4 => Kind::Fifo,
            5 => Kind::Socket,
            6 => Kind::CharDevice,
            7 => Kind::BlockDevice,
            _ => return None,
        })
    }

    /// The kind a `mknod` mode asks for (`S_IFMT` bits).
    pub fn from_mode(mode: u32) -> Option<Kind> {
        Some(match mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Symlink,
            libc::S_IFIFO => Kind::Fifo,
            libc::S_IFSOCK => Kind::Socket,
            libc::S_IFCHR => Kind::CharDevice,
            libc::S_IFBLK => Kind::BlockDevice,
            _ => return None,
        })
    }
}

/// One entry's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub kind: Kind,
    /// Permission bits (`0o7777`).
    pub perm: u16,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
    pub crtime: SystemTime,
    /// A symlink's target.
    pub target: Vec<u8>,
    /// `user.*` extended attributes, by name.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A record that does not decode: the error names what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metadata record: {0}")]
pub struct BadRecord(&'static str);

const VERSION: u8 = 1;

impl Meta {
    /// A new entry of `kind` made now by `uid`:`gid`.
    pub fn new(kind: Kind, perm: u16, uid: u32, gid: u32, now: SystemTime) -> Meta {
        Meta {
            kind,
            perm: perm & 0o7777,
            uid,
            gid,
            rdev: 0,
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            target: Vec::new(),
            xattrs: Vec::new(),
        }
    }

    pub fn xattr(&self, name: &[u8]) -> Option<&[u8]> {
        self.xattrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    /// Sets `name`; returns whether it existed before.
    pub fn set_xattr(&mut self, name: &[u8], value: &[u8]) -> bool {
        match self.xattrs.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => {
                slot.1 = value.to_vec();
                true
            }
            None => {
                self.xattrs.push((name.to_vec(), value.to_vec()));
                false
            }
        }
    }

    /// What a write by an unprivileged process does to the mode (as `chmod` would): drops
    /// set-user-ID, and set-group-ID where it means "run as the group" (group-executable),
    /// not mandatory locking.
    pub fn clear_suidgid(&mut self) {
        let mut perm = self.perm & !(libc::S_ISUID as u16);
        if perm & libc::S_IXGRP as u16 != 0 {
            perm &= !(libc::S_ISGID as u16);
        }
        self.perm = perm;
    }

    /// Removes `name`; returns whether it existed.
    pub fn remove_xattr(&mut self, name: &[u8]) -> bool {
        let before = self.xattrs.len();
        self.xattrs.retain(|(n, _)| n != name);
        self.xattrs.len() != before
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.target.len());
        out.push(VERSION);
        out.push(self.kind as u8);
        out.extend_from_slice(&self.perm.to_le_bytes());
        out.extend_from_slice(&self.uid.to_le_bytes());
        out.extend_from_slice(&self.gid.to_le_bytes());
        out.extend_from_slice(&self.rdev.to_le_bytes());
        for t in [self.atime, self.mtime, self.ctime, self.crtime] {
            let (secs, nanos) = to_parts(t);
            out.extend_from_slice(&secs.to_le_bytes());
            out.extend_from_slice(&nanos.to_le_bytes());
        }
        put_bytes(&mut out, &self.target);
        out.extend_from_slice(&(self.xattrs.len() as u32).to_le_bytes());
        for (name, value) in &self.xattrs {
            put_bytes(&mut out, name);
            put_bytes(&mut out, value);
        }
        out
    }

    pub fn decode(mut bytes: &[u8]) -> Result<Meta, BadRecord> {
        let r = &mut bytes;
        if take::<1>(r)?[0] != VERSION {
            return Err(BadRecord("unknown version"));
        }
        let kind = Kind::from_u8(take::<1>(r)?[0]).ok_or(BadRecord("unknown kind"))?;
        let perm = u16::from_le_bytes(take(r)?);
        let uid = u32::from_le_bytes(take(r)?);
        let gid = u32::from_le_bytes(take(r)?);
        let rdev = u32::from_le_bytes(take(r)?);
        let mut times = [UNIX_EPOCH; 4];
        for t in &mut times {
            let secs = i64::from_le_bytes(take(r)?);
            let nanos = u32::from_le_bytes(take(r)?);
            *t = from_parts(secs, nanos).ok_or(BadRecord("time out of range"))?;
        }
        let target = take_bytes(r)?.to_vec();
        let n = u32::from_le_bytes(take(r)?);
        let mut xattrs = Vec::new();
        for _ in 0..n {
            let name = take_bytes(r)?.to_vec();
            let value = take_bytes(r)?.to_vec();
            xattrs.push((name, value));
        }
        if !r.is_empty() {
            return Err(BadRecord("trailing bytes"));
        }
        let [atime, mtime, ctime, crtime] = times;
        Ok(Meta {
            kind,
            perm,
            uid,
            gid,
            rdev,
            atime,
            mtime,
            ctime,
            crtime,
            target,
            xattrs,
        })
    }
}

fn to_parts(t: SystemTime) -> (i64, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            let (s, n) = (d.as_secs() as i64, d.subsec_nanos());
            if n == 0 {
                (-s, 0)
            } else {
                (-s - 1, 1_000_000_000 - n)
            }
        }
    }
}

fn from_parts(secs: i64, nanos: u32) -> Option<SystemTime> {
    if nanos >= 1_000_000_000 {
        return None;
    }
    if secs >= 0 {
        UNIX_EPOCH.checked_add(Duration::new(secs as u64, nanos))
    } else {
        UNIX_EPOCH
            .checked_sub(Duration::from_secs(secs.unsigned_abs()))?
            .checked_add(Duration::from_nanos(nanos.into()))
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

fn take<const N: usize>(r: &mut &[u8]) -> Result<[u8; N], BadRecord> {
    let (head, rest) = r.split_at_checked(N).ok_or(BadRecord("cut short"))?;
    *r = rest;
    head.try_into().map_err(|_| BadRecord("cut short"))
}

fn take_bytes<'a>(r: &mut &'a [u8]) -> Result<&'a [u8], BadRecord> {
    let len = u32::from_le_bytes(take(r)?) as usize;
    let (head, rest) = r.split_at_checked(len).ok_or(BadRecord("cut short"))?;
    *r = rest;
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_damage_is_an_error() {
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
        let mut m = Meta::new(Kind::Symlink, 0o1777, 1000, 100, t);
        m.target = b"../target".to_vec();
        m.rdev = 7;
        m.atime = UNIX_EPOCH - Duration::new(5, 250);
        m.set_xattr(b"user.a", b"1");
        m.set_xattr(b"user.b", b"");
        assert!(m.set_xattr(b"user.a", b"2"));
        let bytes = m.encode();
        assert_eq!(Meta::decode(&bytes), Ok(m.clone()));
        for cut in 0..bytes.len() {
            assert!(Meta::decode(&bytes[..cut]).is_err(), "cut to {cut}");
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(Meta::decode(&extra).is_err());
        let mut bad_kind = bytes;
        bad_kind[1] = 99;
        assert_eq!(Meta::decode(&bad_kind), Err(BadRecord("unknown kind")));
        assert!(m.remove_xattr(b"user.a"));
        assert!(!m.remove_xattr(b"user.a"));
    }

    #[test]
    fn a_write_clears_set_id_bits_as_chmod_would() {
        let mut m = Meta::new(Kind::File, 0o6755, 0, 0, UNIX_EPOCH);
        m.clear_suidgid();
        assert_eq!(m.perm, 0o755);
        // Without group execute, set-group-ID marks mandatory locking and stays.
        let mut m = Meta::new(Kind::File, 0o6644, 0, 0, UNIX_EPOCH);
        m.clear_suidgid();
        assert_eq!(m.perm, 0o2644);
    }

    #[test]
    fn mknod_modes_map_to_kinds() {
        assert_eq!(Kind::from_mode(libc::S_IFIFO | 0o644), Some(Kind::Fifo));
        assert_eq!(Kind::from_mode(libc::S_IFREG), Some(Kind::File));
        assert_eq!(Kind::from_mode(0), None);
    }
}
