//! Other doors in the mount's process (REST in `strata serve --mount`) change keys under it:
//! the kernel keeps entries and attributes for a long time, so what they change must be
//! dropped from its caches at once, and a value that expires must leave when it does.

use std::time::Duration;

use strata_engine::{ReadOptions, WriteBatch, WriteOptions};
use strata_fusefs::FsConfig;

use crate::common::Mount;

#[test]
fn changes_from_another_face_show_at_once() {
    // Long enough that only an invalidation can explain a fresh answer.
    let config = FsConfig {
        ttl: Duration::from_secs(600),
        ..FsConfig::default()
    };
    let Some(m) = Mount::with(config, false) else {
        return;
    };
    let cf = m.cf();
    std::fs::create_dir_all(m.path().join("tree/sub")).unwrap();
    std::fs::write(m.path().join("tree/sub/f"), b"short").unwrap();
    std::fs::write(m.path().join("tree/g"), b"g").unwrap();
    assert_eq!(
        std::fs::metadata(m.path().join("tree/sub/f"))
            .unwrap()
            .len(),
        5
    );
    m.db.put_cf(&cf, "tree/sub/f", b"much longer now").unwrap();
    m.invalidator.key_changed(b"tree/sub/f");
    assert_eq!(
        std::fs::metadata(m.path().join("tree/sub/f"))
            .unwrap()
            .len(),
        15
    );
    assert_eq!(
        std::fs::read(m.path().join("tree/sub/f")).unwrap(),
        b"much longer now"
    );
    // A name looked up and not found is cached as absent, until another face's write of it,
    // or of a key below it, is notified.
    for (probe, key) in [("tree/h", "tree/h"), ("fresh", "fresh/dir/x")] {
        assert!(!m.path().join(probe).exists());
        m.db.put_cf(&cf, key, b"new").unwrap();
        assert!(
            !m.path().join(probe).exists(),
            "{probe} was looked up again"
        );
        m.invalidator.key_changed(key.as_bytes());
        assert_eq!(std::fs::read(m.path().join(key)).unwrap(), b"new");
    }
    // A subtree deleted from another face vanishes, directories made by mkdir included.
    let mut batch = WriteBatch::new();
    strata_fusefs::delete_range_with_metadata(&m.db, &mut batch, &cf, b"tree/", b"tree0");
    strata_fusefs::delete_range_with_metadata(&m.db, &mut batch, &cf, b"fresh/", b"fresh0");
    m.db.write(batch, &WriteOptions::default()).unwrap();
    m.invalidator.range_deleted(b"tree/", b"tree0");
    m.invalidator.range_deleted(b"fresh/", b"fresh0");
    assert!(!m.path().join("tree/sub/f").exists());
    assert!(!m.path().join("tree").exists());
    let mut it = m.db.iter_cf(&ReadOptions::default(), &cf).unwrap();
    it.seek_to_first();
    assert!(!it.valid());
}

#[test]
fn the_kernel_keeps_entries_for_the_default_ttl() {
    // What makes `stat` cheap; `changes_from_another_face_show_at_once` is what makes it safe.
    assert!(strata_fusefs::DEFAULT_TTL >= Duration::from_secs(30));
    let Some(m) = Mount::new() else { return };
    std::fs::write(m.path().join("f"), b"stored").unwrap();
    assert_eq!(std::fs::metadata(m.path().join("f")).unwrap().len(), 6);
    // Written behind the mount's back, with no notice: only the cached length can answer 6.
    m.db.put_cf(&m.cf(), "f", b"longer than before").unwrap();
    assert_eq!(std::fs::metadata(m.path().join("f")).unwrap().len(), 6);
}

#[test]
fn a_value_written_with_a_ttl_leaves_the_mount_when_it_expires() {
    let Some(m) = Mount::new() else { return };
    let cf = m.cf();
    // One small enough to stay in the tables, one in a blob file.
    m.db.put_with_ttl(&cf, "brief", b"soon gone", 2).unwrap();
    m.db.put_with_ttl(&cf, "brief-big", vec![7u8; 100 << 10], 2)
        .unwrap();
    m.db.put_cf(&cf, "lasting", b"stays").unwrap();
    for name in ["brief", "brief-big", "lasting"] {
        m.invalidator.key_changed(name.as_bytes());
        assert!(m.path().join(name).exists(), "{name}");
    }
    let listed = |m: &Mount| {
        let mut names: Vec<String> = std::fs::read_dir(m.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    assert_eq!(listed(&m), ["brief", "brief-big", "lasting"]);
    // Nothing tells the kernel: the entries it keeps must end with the values.
    std::thread::sleep(Duration::from_millis(3100));
    for name in ["brief", "brief-big"] {
        let gone = std::fs::metadata(m.path().join(name)).unwrap_err();
        assert_eq!(gone.raw_os_error(), Some(libc::ENOENT), "{name}");
    }
    assert_eq!(listed(&m), ["lasting"]);
    assert_eq!(std::fs::read(m.path().join("lasting")).unwrap(), b"stays");
}

#[test]
fn a_directory_only_keys_implied_goes_with_its_last_key() {
    let Some(m) = Mount::new() else { return };
    let cf = m.cf();
    m.db.put_cf(&cf, "implied/f", b"x").unwrap();
    m.invalidator.key_changed(b"implied/f");
    assert!(m.path().join("implied").is_dir());
    // Deleted with nothing told to the kernel (as when the last key below expires).
    m.db.delete_cf(&cf, "implied/f").unwrap();
    std::thread::sleep(Duration::from_millis(1300));
    let gone = std::fs::metadata(m.path().join("implied")).unwrap_err();
    assert_eq!(gone.raw_os_error(), Some(libc::ENOENT));
}

/// A directory inside a mount is on FUSE: a store opened there would wait on the mount's process
/// for every append, so the engine never commits there on a thread that must not wait
/// (`Db::try_write`). The store's own directory, on the local disk, is local.
#[test]
fn the_engine_takes_a_mount_for_a_filesystem_that_may_wait() {
    use strata_engine::FileSystem;
    let Some(m) = Mount::new() else { return };
    let disk = strata_engine::fs::StdFileSystem;
    assert!(!disk.appends_are_local(m.path()));
    assert!(disk.appends_are_local(m.store.path()));
}
