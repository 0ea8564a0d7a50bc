//! The `dropcache` workload: the operating system's page cache lets go of the store's files, so
//! the reads after it go to the device, as the first reads after a reboot do. Unlike
//! `echo 3 > /proc/sys/vm/drop_caches` it needs no root and touches no other file.

use std::path::Path;

/// Writes back and evicts from the page cache every file directly in `dir`; returns how many.
pub fn drop_page_cache(dir: &Path) -> Result<usize, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    let mut dropped = 0;
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .path();
        if !path.is_file() {
            continue;
        }
        // A file deleted since the listing (a compaction's input) has nothing left to drop.
        let Ok(file) = std::fs::File::open(&path) else {
            continue;
        };
        evict(&file)
            .map_err(|e| format!("cannot drop {} from the page cache: {e}", path.display()))?;
        dropped += 1;
    }
    Ok(dropped)
}

/// Dirty pages cannot be dropped: they are written back first.
#[cfg(target_os = "linux")]
fn evict(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    file.sync_all()?;
    // SAFETY: posix_fadvise reads no memory of ours; the descriptor is open for the call.
    let err = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    match err {
        0 => Ok(()),
        e => Err(std::io::Error::from_raw_os_error(e)),
    }
}

#[cfg(not(target_os = "linux"))]
fn evict(_file: &std::fs::File) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::io::Write;

    use super::*;

    /// Bytes of `path` the page cache holds, as util-linux's `fincore` reports them.
    fn resident(path: &Path) -> u64 {
        let out = std::process::Command::new("fincore")
            .args(["--bytes", "--noheadings", "--output", "RES"])
            .arg(path)
            .output()
            .unwrap();
        assert!(out.status.success(), "fincore failed: {out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    #[test]
    fn files_leave_the_page_cache_and_keep_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.sst");
        let data: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&data)
            .unwrap();
        assert!(resident(&path) > 0, "a file just written is cached");
        assert_eq!(drop_page_cache(dir.path()).unwrap(), 1);
        assert_eq!(resident(&path), 0);
        assert_eq!(std::fs::read(&path).unwrap(), data);
        assert!(drop_page_cache(&dir.path().join("missing")).is_err());
    }
}
