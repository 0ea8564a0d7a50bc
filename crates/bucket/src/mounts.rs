//! Where a path lies on its filesystem, through this process's mounts (`/proc/self/mountinfo`):
//! the filesystem's device and the path from that filesystem's root. A bind mount shows one
//! directory under two names, and a container's volumes are bind mounts of directories that
//! may lie inside one another on the host; two paths are one place, or one inside the other,
//! exactly when their devices match and one such path is a prefix of the other.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// One mount: a filesystem's directory `root` shown at `point`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    device: String,
    root: PathBuf,
    point: PathBuf,
}

/// The mounts of `/proc/self/mountinfo`'s text, in its order (a later one covers an earlier
/// one at the same point). Lines it cannot read are skipped.
pub(crate) fn parse(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            // ID PARENT MAJOR:MINOR ROOT POINT OPTIONS ... - TYPE SOURCE OPTIONS
            let mut fields = line.split(' ');
            let device = fields.nth(2)?.to_string();
            let root = PathBuf::from(unescape(fields.next()?));
            let point = PathBuf::from(unescape(fields.next()?));
            Some(Mount {
                device,
                root,
                point,
            })
        })
        .collect()
}

/// The kernel writes a space, tab, newline and backslash in a path as `\` and three octal
/// digits; the bytes are the path's, whatever their encoding.
fn unescape(field: &str) -> OsString {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |n, c| n.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    OsString::from_vec(out)
}

/// Where the absolute, resolved `path` lies: the device of the mount it is under (the one
/// with the longest mount point, the last of equals) and its path from that filesystem's root.
pub(crate) fn place(path: &Path, mounts: &[Mount]) -> Option<(String, PathBuf)> {
    let mut best: Option<&Mount> = None;
    for m in mounts.iter().filter(|m| path.starts_with(&m.point)) {
        if best.is_none_or(|b| m.point.components().count() >= b.point.components().count()) {
            best = Some(m);
        }
    }
    let m = best?;
    let rest = path.strip_prefix(&m.point).ok()?;
    Some((m.device.clone(), m.root.join(rest)))
}

/// This process's mounts, read once to judge several paths.
pub(crate) struct Mounts(Vec<Mount>);

impl Mounts {
    /// From `/proc/self/mountinfo`; none where it cannot be read.
    pub(crate) fn of_this_process() -> Mounts {
        let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        Mounts(parse(&text))
    }

    /// Whether `inner` is `outer` or lies inside it, both absolute and resolved: by name, by
    /// an ancestor of `inner` that is `outer` by device and inode (a bind of the directory
    /// itself, seen even where the mounts cannot be read), or by where each lies on its
    /// filesystem.
    pub(crate) fn is_inside(&self, inner: &Path, outer: &Path) -> bool {
        if inner.starts_with(outer) || same_dir_among_ancestors(inner, outer) {
            return true;
        }
        match (place(inner, &self.0), place(outer, &self.0)) {
            (Some((dev_in, in_fs)), Some((dev_out, out_fs))) => {
                dev_in == dev_out && in_fs.starts_with(&out_fs)
            }
            _ => false,
        }
    }
}

/// Whether `outer` is `inner` or one of its ancestors by device and inode rather than by
/// name.
fn same_dir_among_ancestors(inner: &Path, outer: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(outer) = std::fs::metadata(outer) else {
        return false;
    };
    inner
        .ancestors()
        .filter_map(|a| std::fs::metadata(a).ok())
        .any(|m| m.dev() == outer.dev() && m.ino() == outer.ino())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A container's view: the host's `/srv` filesystem (8:1) holds the store at `store` and
    /// its backup directory at `store/bk`; both are bind-mounted as volumes.
    const CONTAINER: &str = "\
        1 0 0:50 / / rw - overlay overlay rw\n\
        2 1 8:1 /store /data rw - ext4 /dev/sda1 rw\n\
        3 1 8:1 /store/bk /backups rw - ext4 /dev/sda1 rw\n\
        4 1 8:1 /other /elsewhere rw - ext4 /dev/sda1 rw\n\
        5 1 8:2 /store /second\\040disk rw - ext4 /dev/sda2 rw\n";

    #[test]
    fn a_bind_mounted_volume_is_placed_on_the_filesystem_it_comes_from() {
        let mounts = parse(CONTAINER);
        assert_eq!(mounts.len(), 5);
        let at = |p: &str| place(Path::new(p), &mounts).unwrap();
        assert_eq!(at("/backups/1"), ("8:1".into(), "/store/bk/1".into()));
        assert_eq!(at("/data"), ("8:1".into(), "/store".into()));
        assert_eq!(at("/tmp/x"), ("0:50".into(), "/tmp/x".into()));
        assert_eq!(at("/second disk/a"), ("8:2".into(), "/store/a".into()));
        let inside = |a: &str, b: &str| {
            let ((da, pa), (db, pb)) = (at(a), at(b));
            da == db && pa.starts_with(pb)
        };
        assert!(inside("/backups", "/data"), "a volume inside the store's");
        assert!(!inside("/elsewhere", "/data"));
        assert!(!inside("/second disk", "/data"), "another disk, same path");
        assert!(!inside("/data", "/backups"));
    }

    #[test]
    fn escaped_paths_and_broken_lines() {
        assert_eq!(unescape(r"/a\040b\134c\011"), OsString::from("/a b\\c\t"));
        assert_eq!(unescape(r"/not\09"), OsString::from(r"/not\09"));
        assert!(parse("garbage\n1 2\n").is_empty());
    }
}
