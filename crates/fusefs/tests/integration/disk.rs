//! The mount over a store whose disk fills: writes answer ENOSPC, `rm` still works, and once
//! room returns the mount carries on with nothing acknowledged lost.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::sync::Arc;

use strata_engine::fs::SmallDisk;
use strata_engine::{Db, Options};
use strata_fusefs::FsConfig;

use crate::common::{Mount, fuse_available};

/// Bytes that do not compress, different for each file.
fn contents(i: usize) -> Vec<u8> {
    (0..64u64 << 10)
        .map(|j| ((i as u64 * 65_536 + j).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
        .collect()
}

/// Creates, writes and fsyncs a file: `Ok` means the mount acknowledged it as durable.
fn write_synced(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[test]
fn a_full_disk_answers_enospc_keeps_rm_working_and_carries_on_when_room_returns() {
    if !fuse_available() {
        return;
    }
    let room = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::for_test(room.path(), 24 << 20) else {
        return;
    };
    let store = tempfile::tempdir_in(disk.path()).unwrap();
    let filler = disk.path().join("filler");
    let mut opts = Options::default();
    let config = FsConfig::default();
    strata_fusefs::prepare_options(&mut opts, &config.column_family);
    opts.write_buffer_size = 1 << 20;
    opts.reserved_disk_bytes = 1 << 20;
    let db = Arc::new(Db::open(store.path(), opts.clone()).unwrap());
    std::fs::write(&filler, vec![1u8; 12 << 20]).unwrap();
    let m = Mount::over(db, store, tempfile::tempdir().unwrap(), config, false);

    let (mut acked, mut refused) = (Vec::new(), 0);
    for i in 0..400 {
        match write_synced(&m.path().join(format!("f{i}")), &contents(i)) {
            Ok(()) => acked.push(i),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "f{i}: {e}");
                refused += 1;
                if refused == 10 {
                    break;
                }
            }
        }
    }
    assert_eq!(refused, 10, "the disk never filled");
    eprintln!("{} files acknowledged before the disk filled", acked.len());
    assert!(
        acked.len() > 10,
        "{} files before the disk filled",
        acked.len()
    );
    // Reads and listings go on.
    assert_eq!(std::fs::read(m.path().join("f0")).unwrap(), contents(0));
    assert!(std::fs::read_dir(m.path()).unwrap().count() >= acked.len());

    // `rm` works on the full disk: a third of the files go, one of them held open (its bytes
    // must stay for the descriptor: the unlink is a move), and it goes first.
    let removed: Vec<usize> = acked.iter().copied().filter(|i| i % 3 == 0).collect();
    let held = std::fs::File::open(m.path().join(format!("f{}", removed[0]))).unwrap();
    for i in &removed {
        std::fs::remove_file(m.path().join(format!("f{i}"))).unwrap();
    }
    let mut still = Vec::new();
    std::io::Read::read_to_end(&mut &held, &mut still).unwrap();
    assert!(
        still == contents(removed[0]),
        "the open file lost its bytes"
    );
    drop(held);
    // The room comes back; the mount carries on by itself.
    std::fs::remove_file(&filler).unwrap();
    for i in 1000..1040 {
        write_synced(&m.path().join(format!("f{i}")), &contents(i)).unwrap();
        acked.push(i);
    }
    let (db, store) = m.unmount_keeping_store();
    drop(Arc::into_inner(db).unwrap());

    let db = Arc::new(Db::open(store.path(), opts).unwrap());
    let m = Mount::over(
        db,
        store,
        tempfile::tempdir().unwrap(),
        FsConfig::default(),
        false,
    );
    for i in acked {
        let got = std::fs::read(m.path().join(format!("f{i}")));
        if removed.contains(&i) {
            assert!(got.is_err(), "f{i} was removed and is back");
        } else {
            assert!(
                got.unwrap() == contents(i),
                "f{i} acknowledged and not intact"
            );
        }
    }
}
