//! Reads held while the writer moves on and collection runs at age zero. A bucket replica's,
//! across its rounds: an iterator, a value reader part way through a value in blob records,
//! and a snapshot; and a store opened at a checkpoint that is dropped meanwhile. Each reads on,
//! byte for byte what it started with, after the writer rewrote and compacted everything and
//! garbage collection ran at age zero; once they are dropped, the tables and blob files only
//! they kept leave the replica.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use strata_bucket::{BucketFs, Durability, checkpoint};
use strata_engine::{Db, Options, ReadOptions, WriteBatch};

use crate::replicas::replica_polling;
use crate::support::{noise, seaweed, synced};
use crate::versions::{churn_log, client, key, leases_in, reader, writer};

/// Values over a blob file's 4 KiB chunk are chunked records, which a value reader reads a
/// step (1 MiB) at a time from the file.
const BIG: usize = 3 << 20;

fn big(round: u64, i: u64) -> Vec<u8> {
    noise(round * 16 + i + 1, BIG)
}

/// Keys in each round's tables: enough that an iterator stopped at the start has fetched only
/// the first of the tables' 64 KiB pages from the bucket.
const KEYS: usize = 2000;

/// A value of a key in the tables: 1 KiB that compresses to about half.
fn small(round: u64, i: usize) -> Vec<u8> {
    let hex: String = noise(round << 32 | i as u64, 500)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{round}-{i}-{hex}").into_bytes()
}

/// Round `round`'s value of every key, in synced batches of 100, then a flush.
fn write_small(db: &Db, round: u64) {
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(100) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            batch.put(key(i), small(round, i));
        }
        db.write(batch, &synced()).unwrap();
    }
    db.flush().unwrap();
}

/// The numbers of the files in `dir` named `suffix` (`.sst`, `.blob`), whole or partly fetched.
pub(crate) fn files(dir: &Path, suffix: &str) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.split_once(suffix).map(|(number, _)| number.to_string()))
        .collect()
}

#[test]
fn reads_held_across_rounds_keep_their_files_through_collection_at_age_zero() {
    let Some(s) = seaweed::shared() else { return };
    let url = s.fresh_url("replica-held-reads");
    let tmp = tempfile::tempdir().unwrap();
    let fs = BucketFs::open(&s.config(&url, tmp.path().join("w"), Durability::Remote)).unwrap();
    let mut o = Options {
        create_if_missing: true,
        filesystem: Arc::new(fs.clone()),
        ..Options::default()
    };
    o.cf.enable_blob_files = true;
    o.cf.min_blob_size = 4096;
    // A file of its own for about each value: round 1's files end up holding nothing live.
    o.cf.blob_file_size = 4 << 20;
    let db = Db::open(fs.root(), o).unwrap();
    let write_round = |round: u64| {
        for i in 0..2 {
            db.put(format!("big{i}"), big(round, i)).unwrap();
        }
        write_small(&db, round);
    };
    write_round(1);
    let hour = Duration::from_secs(3600);
    let replica = replica_polling(s, &url, &tmp.path().join("r"), None, hour);

    let snapshot = replica.snapshot();
    let at = ReadOptions {
        snapshot: Some(snapshot.clone()),
        ..Default::default()
    };
    let reader = replica
        .value_reader_cf(&ReadOptions::default(), &replica.default_cf(), "big0")
        .unwrap()
        .unwrap();
    assert_eq!(reader.value_len(), BIG as u64);
    let first_step = reader.read_at(0, 1 << 20).unwrap();
    assert_eq!(&first_step.bytes[..], &big(1, 0)[..1 << 20]);
    let mut iter = replica.iter(&ReadOptions::default()).unwrap();
    iter.seek_to_first();
    assert_eq!(iter.key(), b"big0");
    iter.next();
    let held_tables = files(replica.path(), ".sst");
    let held_blobs = files(replica.path(), ".blob");
    assert!(!held_blobs.is_empty(), "no blob file reached the replica");

    // Two rounds past the first version: every table and blob file of it compacted away,
    // dropped from the log and collected at age zero, before and after the replica moved.
    for round in [2, 3] {
        write_round(round);
        db.compact_range(None, None).unwrap();
        churn_log(&db);
        fs.collect_garbage(Duration::ZERO).unwrap();
        replica
            .wait_for_sequence(db.latest_sequence(), Duration::from_secs(30))
            .unwrap();
        fs.collect_garbage(Duration::ZERO).unwrap();
    }
    assert_eq!(
        replica.get("big0").unwrap().as_deref(),
        Some(&big(3, 0)[..]),
        "the replica moved on"
    );

    // The value reader's steps past the first, from the blob file of round 1.
    let mut offset = 1u64 << 20;
    while offset < BIG as u64 {
        let step = reader.read_at(offset, 1 << 20).unwrap();
        let end = offset as usize + step.bytes.len();
        assert_eq!(
            &step.bytes[..],
            &big(1, 0)[offset as usize..end],
            "at {offset}"
        );
        offset = end as u64;
    }
    // The iterator, on from where it stopped: the other big value and every key of round 1,
    // from table pages it had not fetched.
    assert_eq!(iter.key(), b"big1");
    assert_eq!(iter.value(), &big(1, 1)[..]);
    iter.next();
    for i in 0..KEYS {
        assert!(
            iter.valid(),
            "the iterator ended before {}: {:?}",
            key(i),
            iter.status()
        );
        assert_eq!(iter.key(), key(i).as_bytes());
        assert_eq!(iter.value(), &small(1, i)[..], "{}", key(i));
        iter.next();
    }
    iter.status().unwrap();
    // The snapshot, on both kinds of value.
    assert_eq!(
        replica.get_with(&at, "big1").unwrap().as_deref(),
        Some(&big(1, 1)[..])
    );
    assert_eq!(
        replica.get_with(&at, key(KEYS - 7)).unwrap().as_deref(),
        Some(&small(1, KEYS - 7)[..])
    );

    // Let go: within two rounds the files only they kept leave the replica's working copy.
    drop((reader, iter, snapshot, at));
    for _ in 0..2 {
        churn_log(&db);
        replica
            .wait_for_sequence(db.latest_sequence(), Duration::from_secs(30))
            .unwrap();
    }
    let (tables, blobs) = (
        files(replica.path(), ".sst"),
        files(replica.path(), ".blob"),
    );
    assert!(
        held_tables.iter().all(|t| !tables.contains(t)),
        "round 1's tables stayed: {held_tables:?} then {tables:?}"
    );
    assert!(
        held_blobs.iter().all(|b| !blobs.contains(b)),
        "round 1's blob files stayed: {held_blobs:?} then {blobs:?}"
    );
    assert_eq!(replica.replica_status().unwrap().failures, 0);
}

/// A store opened at a checkpoint (`--checkpoint NAME`) leases its version: the checkpoint
/// dropped while it reads, and collection at age zero after the writer rewrote everything,
/// it still reads its keys from table pages it had not fetched; closed, its lease goes.
#[test]
fn a_checkpoint_read_keeps_its_version_though_the_checkpoint_is_dropped() {
    let Some(s) = seaweed::shared() else { return };
    let url = s.fresh_url("checkpoint-read");
    let tmp = tempfile::tempdir().unwrap();
    let (fs, db) = writer(s, &url, &tmp.path().join("w"));
    let c = client(s, &url);
    let write_round = |round: u64| write_small(&db, round);
    write_round(1);
    checkpoint::create(&c, "frozen").unwrap();
    let reading = reader(s, &url, Some("frozen"));
    assert_eq!(
        reading.get(key(0)).unwrap().as_deref(),
        Some(&small(1, 0)[..])
    );
    let leases = || leases_in(&c);
    assert_eq!(leases().len(), 1, "the checkpoint's reader took no lease");
    checkpoint::drop(&c, "frozen").unwrap();
    write_round(2);
    db.compact_range(None, None).unwrap();
    churn_log(&db);
    fs.collect_garbage(Duration::ZERO).unwrap();
    for i in (0..KEYS).rev() {
        let got = reading.get(key(i)).unwrap();
        assert_eq!(got.as_deref(), Some(&small(1, i)[..]), "{}", key(i));
    }
    drop(reading);
    assert!(leases().is_empty(), "the lease outlived its reader");
}
