//! Directory listings: one child per step, resumed by position through per-handle cookies.

use super::*;

#[derive(Debug)]
pub(super) struct OpenDir {
    pub(super) key: Vec<u8>,
    /// The positions recent entries were listed at, by the offset handed to the kernel: it
    /// resumes after one of the last batch's entries.
    pub(super) cookies: VecDeque<(u64, Position)>,
    pub(super) next_cookie: u64,
    /// On a read-only mount: the listing's cursor, kept between batches so one listing reads
    /// one version of the directory (a replica may move on meanwhile); a rewind takes a new one.
    /// Let go of once the listing reached its end: a handle kept open after that (a file
    /// manager's) must not pin the version's memtables and files for its life.
    pub(super) cursor: Option<crate::store::Cursor>,
    /// On a read-only mount, once a listing reached its end: the last cookie it handed out.
    /// Asked to go on from there, the listing is over, whatever the store shows now.
    pub(super) ended_at: Option<u64>,
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

/// Where listed entries go: names and types (`readdir`), or with attributes too, each counted
/// as a lookup (`readdirplus`).
pub(super) enum Sink<'a> {
    Plain(&'a mut ReplyDirectory),
    Plus(&'a mut ReplyDirectoryPlus),
}

impl FsCore {
    /// Adds one entry; true when the reply is full and the entry was not added.
    fn add_entry(
        &self,
        sink: &mut Sink<'_>,
        key: &[u8],
        kind: Kind,
        cookie: u64,
        name: &[u8],
    ) -> Result<bool> {
        let name = OsStr::from_bytes(name);
        match sink {
            Sink::Plain(reply) => {
                let ino = self
                    .inodes
                    .lock()
                    .peek(key)
                    .unwrap_or_else(|| listing_ino(key));
                Ok(reply.add(INodeNo(ino), cookie, file_type(kind), name))
            }
            Sink::Plus(reply) => {
                // Gone since the step found it: listed without attributes it would not stat.
                let Some(mut e) = self.store.resolve(key)? else {
                    return Ok(false);
                };
                let ino = self.inodes.lock().lookup(key);
                // An open file's pending writes give it its length, as `stat` shows it: the
                // kernel applies these attributes to the inode its writers use.
                if e.kind == Kind::File
                    && let Some(len) = self.unflushed_len(ino)
                {
                    e.size = len;
                }
                let attr = self.attr(ino, &e);
                let full = reply.add(
                    INodeNo(ino),
                    cookie,
                    name,
                    &self.ttl_of(&e),
                    &attr,
                    Generation(0),
                );
                if full {
                    self.inodes.lock().forget(ino, 1);
                }
                Ok(full)
            }
        }
    }

    /// `.` and `..`: never counted as lookups.
    fn add_dot(
        &self,
        sink: &mut Sink<'_>,
        ino: u64,
        key: &[u8],
        cookie: u64,
        name: &str,
    ) -> Result<bool> {
        match sink {
            Sink::Plain(reply) => Ok(reply.add(INodeNo(ino), cookie, FileType::Directory, name)),
            Sink::Plus(reply) => {
                let e = self.entry(key, Some(ino))?;
                let attr = self.attr(ino, &e);
                Ok(reply.add(
                    INodeNo(ino),
                    cookie,
                    name,
                    &self.config.ttl,
                    &attr,
                    Generation(0),
                ))
            }
        }
    }

    pub(super) fn do_readdir(
        &self,
        ino: u64,
        fh: u64,
        offset: u64,
        mut sink: Sink<'_>,
    ) -> Result<()> {
        let d = self
            .dirs
            .lock()
            .get(&fh)
            .cloned()
            .ok_or_else(|| FsError::posix(libc::EBADF, "unknown directory handle"))?;
        let mut d = d.lock();
        // As in `lookup`: the attributes `readdirplus` gives never mix two sides of a rename.
        let _tree = self.tree.read();
        let dir_key = d.key.clone();
        if offset < 1 && self.add_dot(&mut sink, ino, &dir_key, 1, ".")? {
            return Ok(());
        }
        if offset < 2 && self.add_dot(&mut sink, ino, &dir_key, 2, "..")? {
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
        // From 2 on: a directory with no children ends right after `..`.
        if self.config.read_only && offset >= FIRST_COOKIE - 1 && d.ended_at == Some(offset) {
            return Ok(());
        }
        d.ended_at = None;
        let kept = d.cursor.take().filter(|_| offset >= FIRST_COOKIE);
        let mut cursor = match kept {
            Some(c) => c,
            None => self.store.cursor(&dir_key)?,
        };
        let prefix = path::dir_prefix(&dir_key);
        let mut hidden = 0;
        // Ok(true): the directory has no more children.
        let result = loop {
            let next = self
                .store
                .next_child(&mut cursor, after.as_ref(), &mut hidden);
            let (pos, kind) = match next {
                Ok(Some(c)) => c,
                Ok(None) => break Ok(true),
                Err(e) => break Err(e),
            };
            let key = [&prefix[..], pos.name()].concat();
            let cookie = d.next_cookie;
            match self.add_entry(&mut sink, &key, kind, cookie, pos.name()) {
                Ok(true) => break Ok(false),
                Ok(false) => {}
                Err(e) => break Err(e),
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
        // A writable mount lists what it has just written: a fresh cursor each batch.
        if self.config.read_only {
            match result {
                Ok(true) => d.ended_at = Some(last_cookie(&d, offset)),
                _ => d.cursor = Some(cursor),
            }
        }
        result.map(|_| ())
    }
}

/// The cookie a listing that ends now ends at: the last one handed out, or where this batch
/// began when it listed nothing.
fn last_cookie(d: &OpenDir, offset: u64) -> u64 {
    match d.cookies.back() {
        Some((cookie, _)) if *cookie >= offset => *cookie,
        _ => offset.max(FIRST_COOKIE - 1),
    }
}
