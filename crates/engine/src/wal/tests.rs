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

/// A power loss keeps whole sectors from the disk, in no order: zeros from a record's start (a
/// sync's end) to its sector's end, or a whole sector of zeros inside a record, with intact
/// records in later blocks, end the log there, as a cut does. Every place in a sector is tried.
#[test]
fn a_hole_a_power_loss_leaves_ends_the_log_whatever_follows_it() {
    let recs = many_records();
    let data = write_log(&recs);
    let starts = record_starts(&recs);
    for (n, &start) in starts.iter().enumerate().take(150).skip(1) {
        let sector_end = (start / SECTOR + 1) * SECTOR;
        // From the record's start (where a sync ended), and a whole sector inside it.
        for (from, to) in [(start, sector_end), (sector_end, sector_end + SECTOR)] {
            if to > starts[n + 1] && from != start {
                continue; // the sector is not inside this record
            }
            let mut holed = data.clone();
            holed[from..to].fill(0);
            let mut r = LogReader::new(
                &holed,
                Path::new("000001.log"),
                ReadOutcome::FailOnMidLogDamage,
            );
            let mut got = Vec::new();
            while let Some(rec) = r.next_record().unwrap_or_else(|e| panic!("{n}: {e}")) {
                got.push(rec);
            }
            assert_eq!(got[..], recs[..n], "hole at {from}..{to}");
            assert_eq!(r.hole_at, Some(start), "hole at {from}..{to}");
            assert_eq!(r.tail_damage, None);
            assert_eq!(r.torn_tail_bytes, holed.len() - start);
        }
    }
}

/// Zeros that are no hole, with intact records after them, are still damage: a zeroed header
/// whose sector holds more, zeros short of a sector, a wrong byte.
#[test]
fn zeros_short_of_a_hole_and_wrong_bytes_are_still_damage() {
    let recs = many_records();
    let data = write_log(&recs);
    let starts = record_starts(&recs);
    let start = starts[10];
    let aligned = starts
        .iter()
        .find(|&&s| s % SECTOR == 0)
        .copied()
        .unwrap_or((starts[20] / SECTOR + 1) * SECTOR);
    // What each damage zeroes, and where it flips a bit.
    let damages = [
        ("a zeroed header", start..start + HEADER_SIZE, None),
        ("511 zeros in a sector", aligned + 1..aligned + SECTOR, None),
        ("a wrong byte", 0..0, Some(start + 20)),
    ];
    for (what, zeroed, flipped) in damages {
        let mut damaged = data.clone();
        damaged[zeroed].fill(0);
        if let Some(at) = flipped {
            damaged[at] ^= 0x10;
        }
        let mut r = LogReader::new(
            &damaged,
            Path::new("000001.log"),
            ReadOutcome::FailOnMidLogDamage,
        );
        let e = loop {
            match r.next_record() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("{what}: read to the end"),
                Err(e) => break e,
            }
        };
        assert!(
            e.to_string().contains("followed by intact records"),
            "{what}: {e}"
        );
    }
}
