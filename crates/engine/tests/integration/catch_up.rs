//! A read-only store following a writer beside it (`Db::try_catch_up`): it sees every write
//! acknowledged before a catch-up began, its sequence never goes back, and column families and
//! blob files the writer makes appear.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use strata_engine::{Db, Error, Options};

use crate::common::noise;
use crate::db::small_options;

/// Flushes (which delete WALs under the reader) but no compactions: a read-only store on a
/// local directory reads tables a compaction may delete before it opens them.
fn writer_options() -> Options {
    let mut o = small_options();
    o.create_if_missing = true;
    o.cf.write_buffer_size = 256 << 10;
    o.cf.disable_auto_compactions = true;
    o
}

/// `writer_options` with values of 1 KiB or more in blob files of a value or two each, sealed
/// as they fill: the file being written is never deleted.
fn blob_writer_options() -> Options {
    let mut o = writer_options();
    o.cf.enable_blob_files = true;
    o.cf.min_blob_size = 1024;
    o.cf.blob_file_size = 64 << 10;
    o
}

#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn a_reader_sees_every_acknowledged_write_and_never_goes_back() {
    let dir = crate::common::tempdir();
    let writer = Arc::new(Db::open(dir.path(), writer_options()).unwrap());
    writer.put("k000000", "v0".repeat(8)).unwrap();
    let reader = Db::open_read_only(dir.path(), small_options()).unwrap();
    let acked = Arc::new(AtomicU64::new(1));
    let done = Arc::new(AtomicBool::new(false));
    const KEYS: u64 = 20_000;
    let writing = {
        let (writer, acked, done) = (writer.clone(), acked.clone(), done.clone());
        std::thread::spawn(move || {
            for i in 1..KEYS {
                writer
                    .put(format!("k{i:06}"), format!("v{i}").repeat(8))
                    .unwrap();
                acked.store(i + 1, Ordering::Release);
            }
            done.store(true, Ordering::Release);
        })
    };
    let (mut seen, mut rounds) = (reader.latest_sequence(), 0);
    loop {
        let finished = done.load(Ordering::Acquire);
        let before = acked.load(Ordering::Acquire);
        let caught = reader.try_catch_up().unwrap();
        assert!(
            caught.to >= caught.from && caught.from >= seen,
            "{caught:?} after {seen}"
        );
        seen = caught.to;
        assert_eq!(reader.latest_sequence(), seen);
        let last = before - 1;
        assert_eq!(
            reader.get(format!("k{last:06}")).unwrap().as_deref(),
            Some(format!("v{last}").repeat(8).as_bytes()),
            "key {last} was acknowledged before the catch-up began"
        );
        rounds += 1;
        if finished {
            break;
        }
    }
    writing.join().unwrap();
    let all = crate::db::keys(&reader, &Default::default());
    assert_eq!(all.len() as u64, KEYS);
    assert!(rounds > 2, "the reader caught up only {rounds} times");
    assert!(
        writer.statistics().flushes > 1,
        "the writer never flushed: no WAL was deleted under the reader"
    );
}

#[test]
fn column_families_and_blob_files_the_writer_makes_appear() {
    let dir = crate::common::tempdir();
    let mut o = writer_options();
    o.cf.enable_blob_files = true;
    o.cf.min_blob_size = 1024;
    let writer = Db::open(dir.path(), o.clone()).unwrap();
    writer.put("small", "s").unwrap();
    let reader = Db::open_read_only(dir.path(), o.clone()).unwrap();
    assert!(reader.cf("logs").is_err());

    let logs = writer.create_cf("logs", o.cf.clone()).unwrap();
    writer.put_cf(&logs, "line", "1").unwrap();
    writer.put("big", vec![7u8; 64 << 10]).unwrap();
    writer.flush().unwrap();
    writer.put("after-flush", "x").unwrap();
    reader.try_catch_up().unwrap();
    let logs_seen = reader.cf("logs").unwrap();
    assert_eq!(
        reader.get_cf(&logs_seen, "line").unwrap().as_deref(),
        Some(&b"1"[..])
    );
    assert!(reader.get("big").unwrap().as_deref() == Some(&vec![7u8; 64 << 10][..]));
    assert_eq!(
        reader.get("after-flush").unwrap().as_deref(),
        Some(&b"x"[..])
    );

    // A blob file the reader knows while the writer still appends to it: what the writer adds
    // later is read too (the replay stopped at it before, taking it for a torn write).
    writer.put("big2", vec![8u8; 64 << 10]).unwrap();
    reader.try_catch_up().unwrap();
    writer.put("big3", vec![9u8; 64 << 10]).unwrap();
    writer.put("after-big3", "y").unwrap();
    reader.try_catch_up().unwrap();
    // Compared, never printed: 64 KiB of bytes helps no one.
    assert!(reader.get("big3").unwrap().as_deref() == Some(&vec![9u8; 64 << 10][..]));
    assert_eq!(
        reader.get("after-big3").unwrap().as_deref(),
        Some(&b"y"[..])
    );
    assert_eq!(reader.latest_sequence(), writer.latest_sequence());

    writer.drop_cf(&logs).unwrap();
    reader.try_catch_up().unwrap();
    assert!(
        reader.cf("logs").is_err(),
        "a dropped column family stays visible"
    );
    assert!(matches!(
        reader.get_cf(&logs_seen, "line"),
        Err(Error::InvalidArgument(_))
    ));

    // Dropped and made again under the same name between two catch-ups: found by its name,
    // holding what the new family holds.
    let again = writer.create_cf("logs", o.cf.clone()).unwrap();
    reader.try_catch_up().unwrap();
    writer.drop_cf(&again).unwrap();
    let third = writer.create_cf("logs", o.cf.clone()).unwrap();
    writer.put_cf(&third, "line", "3").unwrap();
    reader.try_catch_up().unwrap();
    let logs_now = reader.cf("logs").unwrap();
    assert_eq!(
        reader.get_cf(&logs_now, "line").unwrap().as_deref(),
        Some(&b"3"[..])
    );

    // Only a reader catches up.
    let refused = writer.try_catch_up().unwrap_err();
    assert!(matches!(refused, Error::InvalidArgument(_)), "{refused}");
}

/// A replica follows on its own thread; a reader waiting for a write's sequence sees the
/// write, well before the poll interval would have brought it.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn a_replica_follows_and_a_reader_waits_for_a_sequence() {
    use std::time::Duration;
    let dir = crate::common::tempdir();
    let writer = Db::open(dir.path(), writer_options()).unwrap();
    writer.put("first", "1").unwrap();
    let poll = Duration::from_secs(3600);
    let replica = Db::open_replica(dir.path(), small_options(), poll).unwrap();
    let status = replica.replica_status().unwrap();
    assert_eq!(
        (status.sequence, status.poll_millis),
        (writer.latest_sequence(), 3_600_000)
    );
    assert!(writer.replica_status().is_none());

    for i in 0..50u32 {
        writer.put(format!("k{i}"), format!("v{i}")).unwrap();
        let seq = writer.latest_sequence();
        // The hour-long poll never comes: only the wait's own request brings the write.
        let seen = replica
            .wait_for_sequence(seq, Duration::from_secs(10))
            .unwrap();
        assert!(seen >= seq);
        assert_eq!(
            replica.get(format!("k{i}")).unwrap().as_deref(),
            Some(format!("v{i}").as_bytes())
        );
    }
    let status = replica.replica_status().unwrap();
    assert!(status.rounds >= 50 && status.failures == 0, "{status:?}");
    assert!(status.lag_seconds < 60.0, "{status:?}");

    // A wait too long to name is no panic, and ends when the write comes.
    let next = writer.latest_sequence() + 1;
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| replica.wait_for_sequence(next, Duration::MAX));
        std::thread::sleep(Duration::from_millis(50));
        writer.put("late", "1").unwrap();
        assert!(waiting.join().unwrap().unwrap() >= next);
    });

    // A sequence no write has: the writer says so at once, the replica after its bound.
    let future = writer.latest_sequence() + 1000;
    assert!(matches!(
        writer.wait_for_sequence(future, Duration::from_secs(10)),
        Err(Error::InvalidArgument(_))
    ));
    let behind = replica
        .wait_for_sequence(future, Duration::from_millis(200))
        .unwrap_err();
    assert!(matches!(behind, Error::Unavailable(_)), "{behind}");
    // Waiting a second for it asks for rounds ever less often, not one a millisecond.
    let before = replica.replica_status().unwrap().rounds;
    assert!(
        replica
            .wait_for_sequence(future, Duration::from_secs(1))
            .is_err()
    );
    let rounds = replica.replica_status().unwrap().rounds - before;
    assert!(
        (1..40).contains(&rounds),
        "{rounds} rounds in a second's wait"
    );
    replica.close().unwrap();
    assert!(matches!(
        replica.wait_for_sequence(1, Duration::from_millis(1)),
        Err(Error::Closed)
    ));
}

/// A catch-up that saw no flush replays only the writes past what reads already see, into the
/// memtables in use; one after a flush replays the unflushed WAL into fresh ones. Either way
/// every value is the newest.
#[test]
fn a_catch_up_without_a_flush_replays_only_the_new_writes() {
    let dir = crate::common::tempdir();
    let mut o = writer_options();
    o.cf.write_buffer_size = 64 << 20;
    let writer = Db::open(dir.path(), o).unwrap();
    let put = |range: std::ops::Range<u32>, tag: &str| {
        for i in range {
            writer.put(format!("k{i:04}"), format!("{tag}{i}")).unwrap();
        }
    };
    put(0..100, "a");
    let reader = Db::open_read_only(dir.path(), small_options()).unwrap();
    let replayed = |db: &Db| db.statistics().catch_up_writes;
    reader.try_catch_up().unwrap();
    assert_eq!(
        replayed(&reader),
        100,
        "the first round replays the WAL whole"
    );
    put(100..150, "a");
    put(0..10, "b");
    reader.try_catch_up().unwrap();
    assert_eq!(replayed(&reader), 160, "only the 60 new writes");
    reader.try_catch_up().unwrap();
    assert_eq!(replayed(&reader), 160, "nothing new, nothing replayed");
    for i in 0..150u32 {
        let tag = if i < 10 { "b" } else { "a" };
        assert_eq!(
            reader.get(format!("k{i:04}")).unwrap().as_deref(),
            Some(format!("{tag}{i}").as_bytes()),
            "k{i:04}"
        );
    }
    assert_eq!(crate::db::keys(&reader, &Default::default()).len(), 150);
    // A flush changes the MANIFEST: the next round starts from fresh memtables.
    writer.flush().unwrap();
    put(150..160, "a");
    reader.try_catch_up().unwrap();
    assert_eq!(
        replayed(&reader),
        170,
        "the unflushed WAL (10 writes) into fresh memtables"
    );
    assert_eq!(crate::db::keys(&reader, &Default::default()).len(), 160);
    assert_eq!(reader.get("k0005").unwrap().as_deref(), Some(&b"b5"[..]));
}

/// The writer's flushes and compactions drop the versions no snapshot of its own needs; a
/// snapshot taken on a reader still sees what it saw after the reader catches up past them,
/// and reads without one see the new state.
#[test]
fn a_snapshot_on_a_reader_keeps_what_it_saw_across_catch_ups() {
    let dir = crate::common::tempdir();
    let writer = Db::open(dir.path(), writer_options()).unwrap();
    writer.put("k", "v1").unwrap();
    writer.put("gone", "x").unwrap();
    // In a table the writer's compaction deletes: a reader beside its writer reads it after
    // that only through the table cache's open file, so it is read once first.
    writer.flush().unwrap();
    let reader = Db::open_read_only(dir.path(), small_options()).unwrap();
    assert_eq!(reader.get("k").unwrap().as_deref(), Some(&b"v1"[..]));
    let before = reader.snapshot();
    reader.try_catch_up().unwrap();
    let caught = reader.snapshot();

    writer.put("k", "v2").unwrap();
    writer.delete("gone").unwrap();
    writer.flush().unwrap();
    writer.compact_range(None, None).unwrap();
    reader.try_catch_up().unwrap();

    for snapshot in [before, caught] {
        let at = strata_engine::ReadOptions {
            snapshot: Some(snapshot.clone()),
            ..Default::default()
        };
        let seq = snapshot.sequence();
        assert_eq!(
            reader.get_with(&at, "k").unwrap().as_deref(),
            Some(&b"v1"[..]),
            "at sequence {seq}"
        );
        assert_eq!(
            reader.get_with(&at, "gone").unwrap().as_deref(),
            Some(&b"x"[..]),
            "at sequence {seq}"
        );
        assert_eq!(
            crate::db::keys(&reader, &at),
            vec![
                (b"gone".to_vec(), b"x".to_vec()),
                (b"k".to_vec(), b"v1".to_vec())
            ],
            "an iterator at sequence {seq}"
        );
    }
    assert_eq!(reader.get("k").unwrap().as_deref(), Some(&b"v2"[..]));
    assert_eq!(reader.get("gone").unwrap(), None);
    assert_eq!(reader.latest_sequence(), writer.latest_sequence());
}

/// A replica forgets the blob files the writer deleted once no view of its own reads them: its
/// memory follows the store's files, not its history.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn a_replica_forgets_blob_files_no_read_reaches() {
    use std::time::Duration;
    let dir = crate::common::tempdir();
    let o = blob_writer_options();
    let writer = Db::open(dir.path(), o.clone()).unwrap();
    for i in 0..8 {
        writer.put(format!("big{i}"), noise(i, 32 << 10)).unwrap();
        if i % 2 == 1 {
            writer.flush().unwrap();
        }
    }
    let replica = Db::open_replica(dir.path(), o.clone(), Duration::from_secs(3600)).unwrap();
    let blob_files = |db: &Db| db.properties_cf(&db.default_cf()).unwrap().blob_files.len();
    assert!(blob_files(&replica) > 0);
    let snapshot = replica.snapshot();
    // Read once: a replica beside its writer reads a table the writer deletes only through
    // the table cache's open file.
    assert!(replica.get("big3").unwrap().as_deref() == Some(&noise(3, 32 << 10)[..]));

    // Every big value overwritten small and compacted: the writer deletes its blob files.
    for i in 0..8 {
        writer.put(format!("big{i}"), "small").unwrap();
    }
    writer.flush().unwrap();
    writer.compact_range(None, None).unwrap();
    let (before, kept) = (blob_files(&replica), blob_files(&writer));
    assert!(kept < before, "the writer kept its {before} blob files");
    let settle = |replica: &Db| {
        for i in 0..2 {
            writer.put("tick", format!("{i}")).unwrap();
            replica
                .wait_for_sequence(writer.latest_sequence(), Duration::from_secs(10))
                .unwrap();
        }
    };
    settle(&replica);
    // The snapshot still reads through them.
    assert_eq!(blob_files(&replica), before, "forgotten under a snapshot");
    let at = strata_engine::ReadOptions {
        snapshot: Some(snapshot.clone()),
        ..Default::default()
    };
    assert!(replica.get_with(&at, "big3").unwrap().as_deref() == Some(&noise(3, 32 << 10)[..]));
    drop((snapshot, at));
    settle(&replica);
    assert_eq!(
        blob_files(&replica),
        0,
        "the replica kept what nothing reads"
    );
    assert_eq!(replica.get("big3").unwrap().as_deref(), Some(&b"small"[..]));
}

/// A replica beside its writer reads what its views hold even once the writer's compactions
/// deleted every table and blob file of them, before the replica ever opened one: the view it
/// opened at (under a snapshot), and the one a catch-up moved it to.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn a_replica_reads_files_its_writer_deleted_before_it_opened_them() {
    use std::time::Duration;
    let dir = crate::common::tempdir();
    let o = blob_writer_options();
    let writer = Db::open(dir.path(), o.clone()).unwrap();
    let on_disk = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sst") || n.ends_with(".blob"))
            .collect();
        names.sort();
        names
    };
    let rewrite = |round: u64| {
        for i in 0..8 {
            writer
                .put(format!("big{i}"), noise(round * 8 + i, 32 << 10))
                .unwrap();
            writer.put(format!("k{i}"), format!("v{round}")).unwrap();
            if i % 2 == 1 {
                writer.flush().unwrap();
            }
        }
        writer.compact_range(None, None).unwrap();
        on_disk()
    };
    let first = rewrite(1);
    let replica = Db::open_replica(dir.path(), o.clone(), Duration::from_secs(3600)).unwrap();
    let opened = replica.snapshot();
    let second = rewrite(2);
    assert!(
        first.iter().all(|f| !second.contains(f)),
        "the writer kept {first:?} in {second:?}"
    );
    replica
        .wait_for_sequence(writer.latest_sequence(), Duration::from_secs(10))
        .unwrap();
    let third = rewrite(3);
    assert!(
        second.iter().all(|f| !third.contains(f)),
        "{second:?} {third:?}"
    );

    let at = strata_engine::ReadOptions {
        snapshot: Some(opened.clone()),
        ..Default::default()
    };
    for i in 0..8 {
        let key = format!("big{i}");
        assert!(
            replica.get_with(&at, &key).unwrap().as_deref() == Some(&noise(8 + i, 32 << 10)[..]),
            "{key} at the opened version"
        );
        assert!(
            replica.get(&key).unwrap().as_deref() == Some(&noise(16 + i, 32 << 10)[..]),
            "{key} at the version caught up to"
        );
    }
    assert_eq!(crate::db::keys(&replica, &at).len(), 16);
    let now = crate::db::keys(&replica, &Default::default());
    assert_eq!(now[8], (b"k0".to_vec(), b"v2".to_vec()));
    drop((at, opened));
    replica
        .wait_for_sequence(writer.latest_sequence(), Duration::from_secs(10))
        .unwrap();
    assert_eq!(replica.get("k7").unwrap().as_deref(), Some(&b"v3"[..]));
}
