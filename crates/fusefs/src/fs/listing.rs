//! Directory listings: one child per step, resumed by position through per-handle cookies.

use super::*;

#[derive(Debug)]
pub(super) struct OpenDir {
    pub(super) key: Vec<u8>,
    /// The positions recent entries were listed at, by the offset handed to the kernel: it
    /// resumes after one of the last batch's entries.
    pub(super) cookies: VecDeque<(u64, Position)>,
    pub(super) next_cookie: u64,
}

/// Offsets 1 and 2 are `.` and `..`; listed children count from here.
pub(super) const FIRST_COOKIE: u64 = 3;

/// Cookies kept per open directory: more than two replies' worth of entries.
pub(super) const COOKIES_KEPT: usize = 4096;

/// A stable inode number for a listed entry the kernel does not hold yet (high bit set, so it
/// never equals an assigned one).
pub(super) fn listing_ino(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h | (1 << 63)
}

impl StrataFs {
    pub(super) fn do_readdir(
        &self,
        ino: u64,
        fh: u64,
        offset: u64,
        reply: &mut ReplyDirectory,
    ) -> Result<()> {
        let d = self
            .dirs
            .lock()
            .get(&fh)
            .cloned()
            .ok_or_else(|| FsError::posix(libc::EBADF, "unknown directory handle"))?;
        let mut d = d.lock();
        if offset < 1 && reply.add(INodeNo(ino), 1, FileType::Directory, ".") {
            return Ok(());
        }
        if offset < 2 && reply.add(INodeNo(ino), 2, FileType::Directory, "..") {
            return Ok(());
        }
        let mut after = if offset < FIRST_COOKIE {
            None
        } else {
            let found = d.cookies.iter().find(|(c, _)| *c == offset);
            match found {
                Some((_, pos)) => Some(pos.clone()),
                None => {
                    return Err(FsError::posix(libc::EINVAL, "stale directory offset"));
                }
            }
        };
        let mut cursor = self.store.cursor(&d.key)?;
        let mut hidden = 0;
        let result = loop {
            let next = self
                .store
                .next_child(&mut cursor, after.as_ref(), &mut hidden);
            let (pos, kind) = match next {
                Ok(Some(c)) => c,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            };
            let key = [&path::dir_prefix(&d.key)[..], pos.name()].concat();
            let child_ino = self
                .inodes
                .lock()
                .peek(&key)
                .unwrap_or_else(|| listing_ino(&key));
            let cookie = d.next_cookie;
            let name = OsStr::from_bytes(pos.name());
            if reply.add(INodeNo(child_ino), cookie, file_type(kind), name) {
                break Ok(());
            }
            d.next_cookie += 1;
            d.cookies.push_back((cookie, pos.clone()));
            if d.cookies.len() > COOKIES_KEPT {
                d.cookies.pop_front();
            }
            after = Some(pos);
        };
        self.stats
            .hidden_entries
            .fetch_add(hidden, Ordering::Relaxed);
        result
    }
}
