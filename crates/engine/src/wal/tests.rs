use std::path::Path;

use super::reader::SECTOR;
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

/// Records of varied lengths over several blocks, so that their starts fall at every place in a
/// sector.
fn many_records() -> Vec<Vec<u8>> {
    (0..400u32)
        .map(|i| vec![(i % 251) as u8 + 1; 100 + (i as usize * 37) % 600])
        .collect()
}

/// Where each record of `recs` starts in the log `write_log` makes of them.
fn record_starts(recs: &[Vec<u8>]) -> Vec<usize> {
    (0..recs.len())
        .map(|n| {
            if n == 0 {
                0
            } else {
                write_log(&recs[..n]).len()
            }
        })
        .collect()
}

fn read_wal(data: &[u8]) -> (crate::Result<Vec<Vec<u8>>>, LogReader<'_>) {
    let mut r = LogReader::new(
        data,
        Path::new("000001.log"),
        ReadOutcome::FailOnMidLogDamage,
    )
    .reading_a_wal();
    let mut got = Vec::new();
    let outcome = loop {
        match r.next_record() {
            Ok(Some(rec)) => got.push(rec),
            Ok(None) => break Ok(got),
            Err(e) => break Err(e),
        }
    };
    (outcome, r)
}

/// A power loss leaves each sector as it was at some moment: the bytes appended by then, zeros
/// after. A sector of a record that holds an older version (zeros to its end from the record's
/// start, from its payload's start, or from the sector's own start), with intact records in
/// later blocks, ends the WAL there as a cut does. Over records starting at every place in a
/// sector, some split across blocks.
#[test]
fn a_lost_write_ends_a_wal_whatever_follows_it() {
    let recs = many_records();
    let data = write_log(&recs);
    let starts = record_starts(&recs);
    let mut tried = 0;
    for n in 1..150 {
        let (start, next) = (starts[n], starts[n + 1]);
        let sectors = (start.div_ceil(SECTOR) * SECTOR..next).step_by(SECTOR);
        let cuts = [start, start + HEADER_SIZE].into_iter().chain(sectors);
        for cut in cuts {
            let sector_end = (cut / SECTOR + 1) * SECTOR;
            let mut lost = data.clone();
            lost[cut..sector_end].fill(0);
            if lost[start..next] == data[start..next] {
                continue; // those bytes were zeros already
            }
            tried += 1;
            let (got, r) = read_wal(&lost);
            let got = got.unwrap_or_else(|e| panic!("record {n}, cut at {cut}: {e}"));
            assert_eq!(got[..], recs[..n], "record {n}, cut at {cut}");
            let at = r.lost_write_at.unwrap_or_else(|| panic!("cut at {cut}"));
            assert!((start..next).contains(&at), "cut at {cut}: at {at}");
            assert_eq!(r.tail_damage, None);
            assert_eq!(r.torn_tail_bytes, lost.len() - start);
        }
    }
    assert!(tried > 250, "{tried}");
}

/// Damage that is no lost write, with intact records after it, is still an error: zeros that
/// stop short of their sector's end (a zeroed header with the record's bytes after it, a sector
/// of zeros but its last byte), a wrong byte; and in a MANIFEST (not read as a WAL) a lost write
/// is damage too.
#[test]
fn damage_that_is_no_lost_write_is_still_an_error() {
    let recs = many_records();
    let data = write_log(&recs);
    let starts = record_starts(&recs);
    // A record with more than its header before its sector's end, and a sector inside a payload.
    let n = (1..100)
        .find(|&n| starts[n] % SECTOR < SECTOR - 32)
        .unwrap();
    let start = starts[n];
    let inside = (1..100)
        .map(|n| (starts[n] + HEADER_SIZE).div_ceil(SECTOR) * SECTOR)
        .find(|&s| (1..100).any(|m| starts[m] + HEADER_SIZE <= s && s + SECTOR <= starts[m + 1]))
        .unwrap();
    let damages = [
        ("a zeroed header", start..start + HEADER_SIZE, None),
        (
            "a sector of zeros but its last byte",
            inside..inside + SECTOR - 1,
            None,
        ),
        (
            "zeros from inside a payload to a sector's end",
            inside + 100..inside + SECTOR,
            None,
        ),
        ("a wrong byte", 0..0, Some(start + 20)),
    ];
    for (what, zeroed, flipped) in damages {
        let mut damaged = data.clone();
        damaged[zeroed].fill(0);
        if let Some(at) = flipped {
            damaged[at] ^= 0x80;
            assert_ne!(damaged[at], 0);
        }
        let e = read_wal(&damaged).0.unwrap_err();
        assert!(
            e.to_string().contains("followed by intact records"),
            "{what}: {e}"
        );
    }
    let mut lost = data.clone();
    lost[start + HEADER_SIZE..(start / SECTOR + 1) * SECTOR].fill(0);
    assert!(read_all(&lost, ReadOutcome::FailOnMidLogDamage).is_err());
    assert!(read_wal(&lost).0.is_ok());
}

/// `read_log` leaves out the zeros past a WAL's records (a crashed WAL is as long as it was
/// created) but keeps what a reader needs: the records, read the same, and a last record cut
/// short into zeros still read as a torn tail, never as damage.
#[test]
fn read_log_leaves_out_the_zeros_a_reader_does_not_need() {
    let dir = crate::test_dir::tempdir();
    let path = dir.path().join("000007.log");
    let recs = many_records();
    let full = write_log(&recs);
    for cut in [full.len(), full.len() - 1, full.len() - 300, 4 * BLOCK_SIZE] {
        let mut data = full[..cut].to_vec();
        data.resize(full.len() + 4 * BLOCK_SIZE, 0);
        std::fs::write(&path, &data).unwrap();
        let read = read_log(&StdFileSystem, &path).unwrap();
        assert!(
            read.len() <= cut.div_ceil(BLOCK_SIZE) * BLOCK_SIZE + BLOCK_SIZE,
            "{cut}"
        );
        assert_eq!(read[..], data[..read.len()]);
        let (whole, _) = read_wal(&data);
        let (trimmed, r) = read_wal(&read);
        assert_eq!(trimmed.unwrap(), whole.unwrap(), "cut at {cut}");
        assert_eq!(r.tail_damage, None, "cut at {cut}");
    }
    std::fs::write(&path, vec![0u8; 3 * BLOCK_SIZE]).unwrap();
    assert!(read_log(&StdFileSystem, &path).unwrap().len() <= BLOCK_SIZE);
}

/// Read around damage (`SkipDamage`, as repair does), a WAL goes on at the next block: an intact
/// fragment there that continues a record whose start was damaged is out of order, not a lost
/// write, zeros in it or not, and the records after it are read.
#[test]
fn an_intact_fragment_after_skipped_damage_is_no_lost_write() {
    let recs: Vec<Vec<u8>> = vec![
        b"before".to_vec(),
        vec![0u8; BLOCK_SIZE * 2 + 1000], // zeros: whole sectors of them in every fragment
        b"after".to_vec(),
        vec![9u8; 3000],
    ];
    let mut data = write_log(&recs);
    data[HEADER_SIZE + 2] ^= 0x20; // inside "before": the first block is skipped
    let mut r =
        LogReader::new(&data, Path::new("000001.log"), ReadOutcome::SkipDamage).reading_a_wal();
    let mut got = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        got.push(rec);
    }
    assert_eq!(got[..], recs[2..]);
    assert_eq!(r.lost_write_at, None);
}
