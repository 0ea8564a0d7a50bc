//! Backups of a store in a real SeaweedFS bucket: each object copied once (past the 8 MiB a
//! single PUT carries too), verified, restored past a damaged one, pruned, and a store made
//! again at the same URL backed up anew.

use bytes::Bytes;
use strata_bucket::{backup, checkpoint};
use strata_engine::{Db, ErrorKind, Options};

use crate::support::seaweed;
use crate::support::{get, noise, synced};
use crate::versions::{
    assert_tagged, churn_log, client, faulty_client, fill, key, leases_in, reader, writer,
};

/// Values no compressor shrinks, 10 MiB in all: the table holding them is past the 8 MiB one
/// PUT carries, so copies go as multipart uploads and checks read it in pieces.
fn fill_big(db: &Db) {
    for i in 0..40u64 {
        db.put(format!("big-{i:02}"), noise(i, 256 << 10)).unwrap();
    }
    db.flush().unwrap();
}

fn assert_big(db: &Db) {
    for i in 0..40u64 {
        assert_eq!(
            get(db, &format!("big-{i:02}")),
            Some(noise(i, 256 << 10)),
            "big-{i:02}"
        );
    }
}

/// Opens (or creates) the local store in `dir` with the default options.
fn open_local(dir: &std::path::Path) -> Db {
    Db::open(
        dir,
        Options {
            create_if_missing: true,
            ..Options::default()
        },
    )
    .unwrap()
}

#[test]
fn backups_copy_each_object_once_and_restore_falls_back_past_a_damaged_one() {
    let Some(s) = seaweed::shared() else { return };
    let src_url = s.fresh_url("backup-src");
    let dest_url = s.fresh_url("backups");
    let (src, dest) = (client(s, &src_url), client(s, &dest_url));
    let tmp = tempfile::tempdir().unwrap();
    let (_fs, db) = writer(s, &src_url, &tmp.path().join("src"));
    fill_big(&db);
    fill(&db, 0..300, "first");
    let seen = std::cell::RefCell::new(Vec::new());
    let one = backup::create(&src, &dest, &|p| seen.borrow_mut().push(p)).unwrap();
    let seen = seen.into_inner();
    let last = seen.last().expect("progress was reported");
    assert_eq!(seen.len(), one.backup.objects);
    assert_eq!(
        (last.objects_done, last.bytes_done),
        (last.objects, last.bytes)
    );
    assert!(one.bytes_copied > 8 << 20, "{one:?}");
    let two = backup::create(&src, &dest, &|_| {}).unwrap();
    assert_eq!((two.copied, two.already_there), (0, one.copied), "{two:?}");
    // Compacted: backup 3 shares no table with the first two.
    fill(&db, 0..400, "second");
    db.compact_range(None, None).unwrap();
    // The removal of the compacted tables rides with the next record.
    db.put_with(&synced(), b"after", b"compaction").unwrap();
    let three = backup::create(&src, &dest, &|_| {}).unwrap();
    assert!(three.copied >= 1, "{three:?}");
    assert_eq!(
        backup::list(&dest)
            .unwrap()
            .iter()
            .map(|b| b.number)
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    // The source's backup leases are gone once each backup is made.
    assert!(checkpoint::list(&src).unwrap().is_empty());
    let named = |n: u64| objects_of(&dest, n);
    // Damage an object only backup 3 has: its verify names it, restore takes backup 2.
    let damaged = named(3)
        .difference(&named(2))
        .find(|k| k.contains(".sst."))
        .cloned()
        .expect("backup 3 names a table backup 2 lacks");
    dest.put_overwrite(&damaged, Bytes::from_static(b"not the table"))
        .unwrap();
    let e = backup::verify(&dest, 3).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption);
    assert!(e.to_string().contains(&damaged), "{e}");
    backup::verify(&dest, 2).unwrap();
    let restored_url = s.fresh_url("restored");
    let restored = backup::restore(&dest, None, &client(s, &restored_url), &|_| {}).unwrap();
    assert_eq!(restored.backup.number, 2);
    assert_eq!(restored.skipped.len(), 1);
    assert_eq!(restored.skipped[0].0, 3);
    let db2 = reader(s, &restored_url, None);
    assert_tagged(&db2, 0..300, "first");
    assert_big(&db2);
    assert_eq!(get(&db2, &key(300)), None);
    // A bucket store's backup restores into a directory too, as a local store.
    let local = tmp.path().join("as-local");
    let into_dir = backup::restore_to_dir(&dest, Some(2), &local, &|_| {}).unwrap();
    assert_eq!(into_dir.backup.number, 2);
    let local_db = Db::open(&local, Options::default()).unwrap();
    assert_tagged(&local_db, 0..300, "first");
    assert_big(&local_db);
    drop(local_db);
    // The restored store is writable, and its own.
    {
        let (_f, w) = writer(s, &restored_url, &tmp.path().join("restored"));
        fill(&w, 0..10, "after");
    }
    // Another store's backups are not mixed in.
    let other = s.fresh_url("other-src");
    {
        let (_f, w) = writer(s, &other, &tmp.path().join("other"));
        fill(&w, 0..10, "other");
    }
    let e = backup::create(&client(s, &other), &dest, &|_| {}).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    // Pruning to one keeps the newest; the objects only the others named go.
    let only_old: Vec<String> = named(2).difference(&named(3)).cloned().collect();
    assert!(!only_old.is_empty());
    let pruned = backup::prune(&dest, Some(1), None).unwrap();
    assert_eq!(
        (
            pruned.backups_deleted,
            pruned.backups_kept,
            pruned.objects_deleted
        ),
        (2, 1, only_old.len()),
        "{pruned:?}"
    );
    for key in &only_old {
        assert!(
            dest.head(key).unwrap().is_none(),
            "{key} outlived its backups"
        );
    }
    for key in named(3) {
        assert!(
            dest.head(&key).unwrap().is_some(),
            "{key} went with backup 3 kept"
        );
    }
    assert_eq!(
        backup::prune(&dest, Some(0), None).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn a_store_made_again_at_the_same_url_is_backed_up_anew() {
    let Some(s) = seaweed::shared() else { return };
    let src_url = s.fresh_url("remade");
    let dest_url = s.fresh_url("remade-backups");
    let (src, dest) = (client(s, &src_url), client(s, &dest_url));
    let tmp = tempfile::tempdir().unwrap();
    {
        let (_f, db) = writer(s, &src_url, &tmp.path().join("first"));
        fill(&db, 0..100, "first life");
    }
    backup::create(&src, &dest, &|_| {}).unwrap();
    // Wiped and made again: the new store's first objects take the old ones' names.
    src.delete_many(src.list("").unwrap()).unwrap();
    {
        let (_f, db) = writer(s, &src_url, &tmp.path().join("second"));
        fill(&db, 0..100, "second life");
    }
    let again = backup::create(&src, &dest, &|_| {}).unwrap();
    let source_names = |n: u64| -> std::collections::BTreeSet<String> {
        backup::objects(&dest, n)
            .unwrap()
            .into_iter()
            .map(|(k, _, _)| k.rsplit_once('.').unwrap().0.to_string())
            .collect()
    };
    assert!(
        source_names(1).intersection(&source_names(2)).count() > 0,
        "the new store's objects did not reuse the old names: the case is not exercised"
    );
    assert_eq!(again.already_there, 0, "{again:?}");
    let restored_url = s.fresh_url("remade-restored");
    backup::restore(&dest, None, &client(s, &restored_url), &|_| {}).unwrap();
    assert_tagged(&reader(s, &restored_url, None), 0..100, "second life");
}

#[test]
fn a_local_store_backs_up_closed_and_restores_as_a_directory_or_into_a_bucket() {
    let Some(s) = seaweed::shared() else { return };
    let dest = client(s, &s.fresh_url("local-backups"));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("local");
    let db = open_local(&dir);
    fill_big(&db);
    fill(&db, 0..300, "local");
    db.put_with(&synced(), b"in-the-wal", b"1").unwrap();
    // Served, it is not backed up: its files may change under the copy.
    let e = backup::create_from_dir(&dir, &dest, &|_| {}).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    drop(db);
    let one = backup::create_from_dir(&dir, &dest, &|_| {}).unwrap();
    assert!(one.bytes_copied > 8 << 20, "{one:?}");
    let two = backup::create_from_dir(&dir, &dest, &|_| {}).unwrap();
    assert_eq!((two.copied, two.already_there), (0, one.copied), "{two:?}");
    backup::verify(&dest, 2).unwrap();
    // Into a directory: a store that opens with everything, the WAL's write included.
    let restored = tmp.path().join("restored");
    backup::restore_to_dir(&dest, None, &restored, &|_| {}).unwrap();
    let db = open_local(&restored);
    assert_tagged(&db, 0..300, "local");
    assert_big(&db);
    assert_eq!(get(&db, "in-the-wal").as_deref(), Some(&b"1"[..]));
    drop(db);
    let e = backup::restore_to_dir(&dest, None, &restored, &|_| {}).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    // Into a bucket: the local store moves there as it was.
    let moved = s.fresh_url("moved");
    backup::restore(&dest, None, &client(s, &moved), &|_| {}).unwrap();
    let db = reader(s, &moved, None);
    assert_tagged(&db, 0..300, "local");
    assert_eq!(get(&db, "in-the-wal").as_deref(), Some(&b"1"[..]));
}

#[test]
fn a_served_local_store_backs_up_live_while_writers_and_compactions_run() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let Some(s) = seaweed::shared() else { return };
    let dest = client(s, &s.fresh_url("live-backups"));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("live");
    let mut o = Options {
        create_if_missing: true,
        ..Options::default()
    };
    o.cf.write_buffer_size = 256 << 10;
    o.cf.enable_blob_files = true;
    o.cf.min_blob_size = 4096;
    let db = Arc::new(Db::open(&dir, o.clone()).unwrap());
    fill_big(&db);
    let acked = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let busy: Vec<_> = [false, true]
        .into_iter()
        .map(|compacting| {
            let (db, acked, done) = (db.clone(), acked.clone(), done.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !done.load(Ordering::Acquire) {
                    if compacting {
                        db.compact_range(None, None).unwrap();
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        continue;
                    }
                    db.put(
                        format!("k{i:07}"),
                        noise(i, if i.is_multiple_of(4) { 8192 } else { 200 }),
                    )
                    .unwrap();
                    acked.store(i + 1, Ordering::Release);
                    i += 1;
                }
            })
        })
        .collect();
    while acked.load(Ordering::Acquire) < 3_000 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Served and busy: backed up by the process that has it open, all it acknowledged first.
    let before = acked.load(Ordering::Acquire);
    backup::create_live(&db, false, &dest, &|_| {}).unwrap();
    done.store(true, Ordering::Release);
    for t in busy {
        t.join().unwrap();
    }
    let two = backup::create_live(&db, true, &dest, &|_| {}).unwrap();
    // Every object backup 1 made that backup 2 names again is reused, none copied twice (how
    // many there are depends on what the compactions rewrote meanwhile: all, under load).
    let named = |n: u64| objects_of(&dest, n);
    let shared = named(1).intersection(&named(2)).count();
    assert_eq!(two.already_there, shared, "{two:?}");
    let three = backup::create_live(&db, false, &dest, &|_| {}).unwrap();
    assert_eq!(
        three.copied, 0,
        "an unchanged store copied again: {three:?}"
    );
    backup::verify(&dest, 1).unwrap();
    let restored = tmp.path().join("restored");
    backup::restore_to_dir(&dest, Some(1), &restored, &|_| {}).unwrap();
    let back = Db::open(&restored, o).unwrap();
    assert_big(&back);
    for i in 0..before {
        assert!(
            get(&back, &format!("k{i:07}"))
                == Some(noise(i, if i.is_multiple_of(4) { 8192 } else { 200 })),
            "k{i:07} of the {before} acknowledged before the backup"
        );
    }
}

/// A directory on this machine as the destination, no bucket at all: incremental, checked,
/// private to its owner; a damaged object fails `verify` naming it, and `restore` falls back
/// to the backup before; `prune` keeps what the kept backups name.
#[test]
fn backups_to_a_directory_copy_once_verify_and_restore_past_damage() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let db = open_local(&dir);
    fill_big(&db);
    drop(db);
    let to = tmp.path().join("backups");
    let dest = strata_bucket::Client::directory(&to).unwrap();
    assert_eq!(
        std::fs::metadata(&to).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let one = backup::create_from_dir(&dir, &dest, &|_| {}).unwrap();
    assert!(one.bytes_copied > 8 << 20, "{one:?}");
    let again = backup::create_from_dir(&dir, &dest, &|_| {}).unwrap();
    assert_eq!((again.copied, again.already_there), (0, one.copied));
    // A third with a table of its own, then that table's object damaged.
    let db = open_local(&dir);
    for i in 0..100u64 {
        db.put(format!("more-{i:03}"), noise(1000 + i, 4096))
            .unwrap();
    }
    db.flush().unwrap();
    drop(db);
    let three = backup::create_from_dir(&dir, &dest, &|_| {}).unwrap();
    assert!(three.copied >= 1, "{three:?}");
    let objects: Vec<_> = std::fs::read_dir(to.join("objects/local"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let newest_table = objects
        .iter()
        .filter(|p| p.to_string_lossy().contains(".sst."))
        .max()
        .unwrap()
        .clone();
    let mut bytes = std::fs::read(&newest_table).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&newest_table, bytes).unwrap();
    let e = backup::verify(&dest, 3).unwrap_err();
    let name = newest_table
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    assert!(e.to_string().contains(&name), "{e}");
    backup::verify(&dest, 2).unwrap();
    let restored = tmp.path().join("restored");
    // A restore killed part way (here: its progress report panics after the first file) leaves
    // no half store where the store goes, which would block the next try and could be opened.
    let killed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        backup::restore_to_dir(&dest, None, &restored, &|p| {
            assert!(!restored.exists(), "a half-built store at its place");
            if p.objects_done == 1 {
                panic!("killed part way");
            }
        })
    }));
    assert!(killed.is_err(), "the restore was not cut short");
    assert!(
        !restored.exists(),
        "a killed restore left {}",
        restored.display()
    );
    let r = backup::restore_to_dir(&dest, None, &restored, &|_| {}).unwrap();
    let staged = tmp.path().join(".restored.restoring");
    assert!(!staged.exists(), "the retry left its staging directory");
    assert_eq!(r.backup.number, 2, "{r:?}");
    assert_eq!(r.skipped.len(), 1, "{r:?}");
    let db = open_local(&restored);
    assert_big(&db);
    assert_eq!(get(&db, "more-000"), None);
    drop(db);
    let pruned = backup::prune(&dest, Some(2), None).unwrap();
    assert_eq!(
        (pruned.backups_deleted, pruned.backups_kept),
        (1, 2),
        "{pruned:?}"
    );
    backup::verify(&dest, 2).unwrap();
}

/// A backup's lease is renewed as each piece of an object is read: one object that takes longer
/// to copy than the lease lasts keeps it, so collection at age zero on the source, running the
/// whole time, deletes nothing the backup still reads. Once the lease is released the object
/// goes.
#[test]
fn a_backup_slower_than_its_lease_keeps_it_piece_by_piece() {
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::time::{Duration, Instant};
    use strata_bucket::{Fault, Request};

    let Some(s) = seaweed::shared() else { return };
    let src_url = s.fresh_url("slow-backup-src");
    let tmp = tempfile::tempdir().unwrap();
    let (fs, db) = writer(s, &src_url, &tmp.path().join("src"));
    // One table of six pieces: 48 MiB of values no compressor shrinks.
    const TABLE_BYTES: u64 = 48 << 20;
    for i in 0..192u64 {
        db.put(format!("slow-{i:03}"), noise(i, 256 << 10)).unwrap();
    }
    db.flush().unwrap();
    let plain = client(s, &src_url);
    let tables = || -> Vec<String> {
        let listed = plain.list("data/").unwrap();
        listed.into_iter().filter(|k| k.ends_with(".sst")).collect()
    };
    let table = tables();
    assert_eq!(table.len(), 1, "{table:?}");
    let (src, faults) = faulty_client(s, &src_url);
    let dest = client(s, &s.fresh_url("slow-backups"));
    // Each piece of the table answers 2 s late: 12 s and more for the table (the writer below
    // takes some of it to make the table unreachable), where a lease of 4 s lapses once the
    // bucket took no renewal for 6 s (its time and the clock's grace). Renewed per piece, its
    // renewals come a piece apart: 2 s and the piece's GET and upload, with room for a loaded
    // machine and the bucket's whole-second stamps.
    faults.inject(
        Request::Get,
        ".sst",
        Fault::Delay(Duration::from_secs(2)),
        1000,
    );
    let passes = AtomicUsize::new(0);
    // How many passes had run when the table's copy was done: the step of at least its size.
    let passes_by_table_done = AtomicUsize::new(usize::MAX);
    let bytes_done = AtomicU64::new(0);
    let progress = |p: backup::Progress| {
        let before = bytes_done.swap(p.bytes_done, Ordering::SeqCst);
        if p.bytes_done - before >= TABLE_BYTES {
            let seen = passes.load(Ordering::SeqCst);
            let _ = passes_by_table_done.compare_exchange(
                usize::MAX,
                seen,
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
        }
    };
    std::thread::scope(|scope| {
        let backing =
            scope.spawn(|| backup::create_leased(&src, &dest, Duration::from_secs(4), &progress));
        let deadline = Instant::now() + Duration::from_secs(120);
        while leases_in(&plain).is_empty() {
            assert!(Instant::now() < deadline, "the backup took no lease");
            std::thread::sleep(Duration::from_millis(20));
        }
        // The leased version becomes the only one that names the table: its keys deleted and
        // compacted away, the log's own checkpoint past the version that named it...
        for i in 0..192u64 {
            db.delete(format!("slow-{i:03}")).unwrap();
        }
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        churn_log(&db);
        // ...and collection at age zero runs until the backup is done.
        while !backing.is_finished() {
            assert!(Instant::now() < deadline, "the backup never ended");
            fs.collect_garbage(Duration::ZERO).unwrap();
            passes.fetch_add(1, Ordering::SeqCst);
        }
        let made = backing.join().unwrap().unwrap();
        assert_eq!(made.copied, made.backup.objects);
        backup::verify(&dest, made.backup.number).unwrap();
    });
    let before_done = passes_by_table_done.load(Ordering::SeqCst);
    assert!(
        (1..usize::MAX).contains(&before_done),
        "no collection pass ran while the table was being copied ({before_done})"
    );
    assert!(leases_in(&plain).is_empty(), "the lease was not released");
    // Released, the lease keeps nothing: the table goes (maybe in the last pass above).
    let gone = (0..6).any(|_| {
        fs.collect_garbage(Duration::ZERO).unwrap();
        !tables().contains(&table[0])
    });
    assert!(gone, "{} stayed once the backup let go", table[0]);
}

/// The objects backup `n` in `dest` names.
fn objects_of(dest: &strata_bucket::Client, n: u64) -> std::collections::BTreeSet<String> {
    backup::objects(dest, n)
        .unwrap()
        .into_iter()
        .map(|(k, _, _)| k)
        .collect()
}
