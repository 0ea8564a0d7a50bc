use std::path::Path;

use super::*;
use crate::error::Error;
use crate::fs::{FileSystem, StdFileSystem};

fn write_log(records: &[Vec<u8>]) -> Vec<u8> {
    let dir = crate::test_dir::tempdir();
    let path = dir.path().join("log");
    let mut w = LogWriter::new(StdFileSystem.create(&path).unwrap());
    for r in records {
        w.add_record(r).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    StdFileSystem.read_all(&path).unwrap()
}

fn read_all(data: &[u8], mode: ReadOutcome) -> crate::Result<(Vec<Vec<u8>>, usize)> {
    let mut r = LogReader::new(data, Path::new("000001.log"), mode);
    let mut out = Vec::new();
    while let Some(rec) = r.next_record()? {
        out.push(rec);
    }
    Ok((out, r.torn_tail_bytes))
}

fn sample() -> Vec<Vec<u8>> {
    vec![
        b"small".to_vec(),
        vec![7u8; BLOCK_SIZE * 2 + 100], // spans three blocks
        vec![],
        vec![9u8; BLOCK_SIZE - HEADER_SIZE - 3], // leaves a trailer too small for a header
        b"after trailer".to_vec(),
    ]
}

#[test]
fn round_trip_across_blocks() {
    let recs = sample();
    let data = write_log(&recs);
    let (got, torn) = read_all(&data, ReadOutcome::FailOnMidLogDamage).unwrap();
    assert_eq!(got, recs);
    assert_eq!(torn, 0);
}

#[test]
fn torn_tail_is_dropped_at_every_cut() {
    let recs = sample();
    let data = write_log(&recs);
    let full_len = data.len();
    for cut in (1..full_len).step_by(997).chain([full_len - 1, 3]) {
        let (got, torn) = read_all(&data[..cut], ReadOutcome::FailOnMidLogDamage).unwrap();
        assert!(got.len() < recs.len());
        assert_eq!(got[..], recs[..got.len()], "a prefix survives at cut {cut}");
        assert!(torn > 0 || got.len() == recs.len() - 1 || cut == 0);
    }
}

/// A log extended ahead of its writer (a mapped WAL) and cut by a crash at any byte of its last
/// record keeps that record's place as zeros to the end: a torn tail, as a cut file is, never
/// damage. Every cut of the last two records is tried, into a log of zeros past them.
#[test]
fn a_record_cut_into_zeros_at_any_byte_is_a_torn_tail() {
    let recs: Vec<Vec<u8>> = vec![b"first".to_vec(), vec![5u8; 300], vec![6u8; 40]];
    let data = write_log(&recs);
    let kept = write_log(&recs[..1]).len();
    for cut in kept..data.len() {
        let mut torn_log = data[..cut].to_vec();
        torn_log.resize(data.len() + BLOCK_SIZE, 0);
        let (got, torn) = read_all(&torn_log, ReadOutcome::FailOnMidLogDamage)
            .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(got[..], recs[..got.len()], "cut at {cut}");
        assert!(got.len() < recs.len() && torn > 0, "cut at {cut}");
        let mut r = LogReader::new(
            &torn_log,
            Path::new("000001.log"),
            ReadOutcome::FailOnMidLogDamage,
        );
        while r.next_record().unwrap().is_some() {}
        assert_eq!(r.tail_damage, None, "cut at {cut}");
    }
}

/// A wrong byte inside the last record is still damage, zeros after it or not.
#[test]
fn a_wrong_byte_before_zeros_is_damage() {
    let recs: Vec<Vec<u8>> = vec![b"first".to_vec(), vec![5u8; 300]];
    let mut data = write_log(&recs);
    let at = data.len() - 100;
    data[at] ^= 0x40;
    data.resize(data.len() + BLOCK_SIZE, 0);
    let mut r = LogReader::new(
        &data,
        Path::new("000001.log"),
        ReadOutcome::FailOnMidLogDamage,
    );
    while r.next_record().unwrap().is_some() {}
    assert_eq!(r.tail_damage, Some("checksum mismatch"));
}

#[test]
fn zeroed_tail_is_a_torn_tail() {
    let recs = sample();
    let mut data = write_log(&recs[..1]);
    data.extend(std::iter::repeat_n(0u8, BLOCK_SIZE * 2));
    let (got, torn) = read_all(&data, ReadOutcome::FailOnMidLogDamage).unwrap();
    assert_eq!(got, recs[..1]);
    assert!(torn > 0);
}

#[test]
fn mid_log_damage_is_corruption_naming_the_file() {
    let recs = sample();
    let mut data = write_log(&recs);
    data[10] ^= 0x40; // inside the first record
    match read_all(&data, ReadOutcome::FailOnMidLogDamage) {
        Err(Error::Corruption { file, detail }) => {
            assert_eq!(file, Path::new("000001.log"));
            assert!(detail.contains("checksum"), "{detail}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    let (got, _) = read_all(&data, ReadOutcome::SkipDamage).unwrap();
    // The damaged first block held the small record and the start of the big one.
    assert_eq!(got.last().unwrap(), &recs[4]);
    assert!(!got.contains(&recs[0]));
}

#[test]
fn a_record_is_split_only_when_it_overflows_its_block() {
    let fits = vec![vec![5u8; BLOCK_SIZE - HEADER_SIZE], b"next".to_vec()];
    let data = write_log(&fits);
    assert_eq!(
        data.len(),
        BLOCK_SIZE + HEADER_SIZE + 4,
        "no padding, no split"
    );
    assert_eq!(
        read_all(&data, ReadOutcome::FailOnMidLogDamage).unwrap(),
        (fits, 0)
    );

    let overflows = vec![vec![6u8; BLOCK_SIZE - HEADER_SIZE + 1]];
    let data = write_log(&overflows);
    assert_eq!(
        data.len(),
        BLOCK_SIZE + HEADER_SIZE + 1,
        "one byte in a second fragment"
    );
    assert_eq!(
        read_all(&data, ReadOutcome::FailOnMidLogDamage).unwrap(),
        (overflows, 0)
    );
}

/// A crash in the middle of a record spanning several blocks leaves its first fragments intact
/// and its last cut short: a torn tail, not damage, though intact fragments (the record's own)
/// follow where the record began.
#[test]
fn a_record_cut_in_its_last_block_is_a_torn_tail() {
    let recs = vec![b"before".to_vec(), vec![5u8; BLOCK_SIZE * 3]];
    let data = write_log(&recs);
    for cut in [data.len() - 100, 2 * BLOCK_SIZE + 9, BLOCK_SIZE + 20] {
        let (got, torn) = read_all(&data[..cut], ReadOutcome::FailOnMidLogDamage).unwrap();
        assert_eq!(got, recs[..1], "cut at {cut}");
        assert_eq!(torn, cut - (HEADER_SIZE + 6), "cut at {cut}");
    }
}
