#![allow(clippy::unwrap_used)]

use super::*;

fn write(fs: &FaultInjectionFs, path: &Path, data: &[u8], sync: bool) -> Box<dyn WritableFile> {
    let mut f = fs.create(path).unwrap();
    f.append(data).unwrap();
    f.flush().unwrap();
    if sync {
        f.sync().unwrap();
    }
    f
}

#[test]
fn a_crash_keeps_synced_bytes_and_drops_the_rest() {
    let dir = crate::test_dir::tempdir();
    let fs = FaultInjectionFs::new();
    let synced = dir.path().join("synced");
    let mut f = write(&fs, &synced, b"durable", true);
    f.append(b" and lost").unwrap();
    f.flush().unwrap();
    fs.sync_dir(dir.path()).unwrap();
    let lost = dir.path().join("lost");
    let _g = write(&fs, &lost, b"never in a directory sync", true);

    fs.deactivate();
    assert!(
        f.append(b"x").is_err(),
        "writes fail once the power is gone"
    );
    drop(f);
    fs.drop_unsynced_data().unwrap();
    assert_eq!(std::fs::read(&synced).unwrap(), b"durable");
    assert!(
        !lost.exists(),
        "a creation no directory sync covered is gone"
    );
}

#[test]
fn a_truncation_is_durable_up_to_the_length_it_leaves() {
    let dir = crate::test_dir::tempdir();
    let fs = FaultInjectionFs::new();
    let path = dir.path().join("f");
    let mut f = write(&fs, &path, b"synced", true);
    f.append(b" unsynced tail").unwrap();
    f.flush().unwrap();
    fs.sync_dir(dir.path()).unwrap();
    fs.truncate(&path, 15).unwrap();
    fs.deactivate();
    drop(f);
    fs.drop_unsynced_data().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"synced unsynced");
}

#[test]
fn an_unsynced_rename_is_undone_and_the_old_target_restored() {
    let dir = crate::test_dir::tempdir();
    let fs = FaultInjectionFs::new();
    let (tmp, current) = (dir.path().join("CURRENT.tmp"), dir.path().join("CURRENT"));
    drop(write(&fs, &current, b"old", true));
    fs.sync_dir(dir.path()).unwrap();
    drop(write(&fs, &tmp, b"new", true));
    fs.rename(&tmp, &current).unwrap();
    fs.deactivate();
    fs.drop_unsynced_data().unwrap();
    assert_eq!(std::fs::read(&current).unwrap(), b"old");
    assert!(!tmp.exists());

    drop(write(&fs, &tmp, b"new", true));
    fs.rename(&tmp, &current).unwrap();
    fs.sync_dir(dir.path()).unwrap();
    fs.deactivate();
    fs.drop_unsynced_data().unwrap();
    assert_eq!(std::fs::read(&current).unwrap(), b"new");
}

#[test]
fn rules_fail_after_n_calls_and_at_random_reproducibly() {
    let dir = crate::test_dir::tempdir();
    let fs = FaultInjectionFs::new();
    fs.fail_after(&[FsOp::Create], 2, FaultError::NoSpace);
    for i in 0..2 {
        fs.create(&dir.path().join(format!("{i}"))).unwrap();
    }
    let err = fs.create(&dir.path().join("3")).unwrap_err();
    assert!(
        matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull)
    );
    assert_eq!(fs.injected(), 1);
    fs.clear_faults();
    fs.create(&dir.path().join("4")).unwrap();

    let pattern = |seed| {
        let fs = FaultInjectionFs::new();
        fs.fail_randomly(&[FsOp::Read], 4, FaultError::Eio, seed);
        (0..64)
            .map(|_| fs.read_all(&dir.path().join("4")).is_err())
            .collect::<Vec<_>>()
    };
    let a = pattern(7);
    assert_eq!(a, pattern(7));
    let failures = a.iter().filter(|&&f| f).count();
    assert!((4..=32).contains(&failures), "{failures} of 64 failed");
}
