//! The block format: builder, searches, iteration both ways, damage.
use super::*;
use crate::iter::testutil::{collect_backward, collect_forward};
use crate::key::{internal_key, lookup_key, user_key};
use std::path::Path;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn build(n: u32, interval: usize) -> (Arc<Block>, Entries) {
    let mut b = BlockBuilder::new(interval);
    let mut entries = Vec::new();
    for i in 0..n {
        let k = internal_key(format!("key{:05}", i * 2).as_bytes(), 7, 1);
        let v = format!("value{i}").into_bytes();
        b.add(&k, &v);
        entries.push((k, v));
    }
    (
        Arc::new(Block::new(b.finish(), Path::new("t")).unwrap()),
        entries,
    )
}

#[test]
fn round_trip_with_restarts_and_prefix_compression() {
    for interval in [1, 2, 16] {
        let (block, entries) = build(100, interval);
        assert_eq!(block.num_restarts as usize, 100usize.div_ceil(interval));
        assert_eq!(collect_forward(&mut block.iter()), entries);
        assert_eq!(collect_backward(&mut block.iter()), entries);
    }
    let (prefix, _) = build(100, 16);
    let (plain, _) = build(100, 1);
    assert!(
        prefix.size() < plain.size(),
        "shared prefixes are stored once"
    );
}

#[test]
fn a_builder_reused_after_finish_starts_the_next_block_afresh() {
    let mut b = BlockBuilder::new(16);
    let key = |i: u32| internal_key(format!("key{i:05}").as_bytes(), 7, 1);
    b.add(&key(1), b"one");
    b.add(&key(2), b"two");
    let first = Block::new(b.finish(), Path::new("t")).unwrap();
    assert_eq!(b.last_key(), &key(2)[..], "kept for the table's separators");
    b.add(&key(3), b"three");
    b.add(&key(4), b"four");
    let second = Arc::new(Block::new(b.finish(), Path::new("t")).unwrap());
    assert_eq!(first.num_restarts, 1);
    assert_eq!(
        collect_forward(&mut second.iter()),
        vec![(key(3), b"three".to_vec()), (key(4), b"four".to_vec())]
    );
}

/// Stepped searches, whole or bounded by the answers for smaller and larger targets, find
/// what one `restart_before` finds, for targets before, between, on and past the keys.
#[test]
fn stepped_searches_agree_with_a_single_search() {
    for interval in [1, 3, 16] {
        let (block, _) = build(200, interval);
        let targets: Vec<Vec<u8>> = (0..420)
            .step_by(7)
            .map(|i| lookup_key(format!("key{i:05}").as_bytes(), 100))
            .chain([lookup_key(b"a", 1), lookup_key(b"zzz", 1)])
            .collect();
        let expected: Vec<Option<u32>> = targets.iter().map(|t| block.restart_before(t)).collect();
        let searches: Vec<(&Block, &[u8])> =
            targets.iter().map(|t| (&*block, t.as_slice())).collect();
        let mut found = Vec::new();
        Block::restarts_before(&searches, &mut found);
        assert_eq!(found, expected, "interval {interval}");
        let mut sorted: Vec<&[u8]> = targets.iter().map(|t| t.as_slice()).collect();
        sorted.sort_by(|a, b| compare_internal(a, b));
        let (first, last) = (
            block.restart_before(sorted[0]).unwrap(),
            block.restart_before(sorted[sorted.len() - 1]).unwrap(),
        );
        let searches: Vec<(&Block, &[u8])> = sorted.iter().map(|t| (&*block, *t)).collect();
        Block::restarts_within(&searches, vec![(first, last); sorted.len()], &mut found);
        let expected: Vec<Option<u32>> = sorted.iter().map(|t| block.restart_before(t)).collect();
        assert_eq!(found, expected, "bounded, interval {interval}");
        assert!(
            expected
                .iter()
                .any(|&r| r != Some(first) && r != Some(last))
        );
    }
}

/// Index blocks of many shapes, searched with probe words and without, for targets below,
/// among, between and above their keys: the same restart every time.
#[test]
fn probe_words_never_change_where_a_search_lands() {
    let mut rng = 0x9e37_79b9_u32;
    let mut next = move |n: u32| {
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        rng % n
    };
    let shapes: Vec<Vec<Vec<u8>>> = vec![
        // Zero-padded decimal keys: a long shared prefix, then digits; an index block's last
        // separator is a short successor sharing nothing with them.
        (0..500u32)
            .map(|i| format!("{:016}", i * 37).into_bytes())
            .chain([b"1".to_vec()])
            .collect(),
        // Outliers at both ends, below and above the prefix most keys share.
        [b"".to_vec(), b"a".to_vec(), b"m".to_vec(), b"m0".to_vec()]
            .into_iter()
            .chain((0..200u32).map(|i| format!("m0000{i:05}").into_bytes()))
            .chain([b"m1".to_vec(), b"n".to_vec(), vec![0xff; 9]])
            .collect(),
        // Keys that differ only past the word: every word equal.
        (0..300u32)
            .map(|i| format!("pp{}{i:06}", "x".repeat(8)).into_bytes())
            .collect(),
        // The first key a prefix of every other, and keys shorter than a word.
        (0..200u32)
            .map(|i| {
                if i == 0 {
                    b"a".to_vec()
                } else {
                    format!("a{:x}", i).into_bytes()
                }
            })
            .collect(),
        // Random keys of 0 to 12 bytes over a small alphabet: ties, prefixes, empty key.
        (0..400)
            .map(|_| {
                (0..next(13))
                    .map(|_| b"ab\0\xff"[next(4) as usize])
                    .collect()
            })
            .collect(),
    ];
    for mut users in shapes {
        users.sort();
        users.dedup();
        let mut b = BlockBuilder::new(1);
        for (i, u) in users.iter().enumerate() {
            // Two entries for some keys: equal user keys, sequence numbers descending.
            if i % 5 == 0 {
                b.add(&internal_key(u, 90, 1), b"h");
            }
            b.add(&internal_key(u, 10, 1), b"h");
        }
        let data = b.finish();
        let plain = Block::new(data.clone(), Path::new("t")).unwrap();
        let probed = Block::new_index(data, Path::new("t")).unwrap();
        assert!(probed.probes.is_some(), "{} keys", users.len());
        assert!(probed.memory() > probed.size());
        let mut targets: Vec<Vec<u8>> = vec![lookup_key(b"", 5), lookup_key(&[0xff; 20], 5)];
        for u in &users {
            for seq in [100, 50, 10, 5] {
                targets.push(lookup_key(u, seq));
            }
            let mut longer = u.clone();
            longer.push(0);
            targets.push(lookup_key(&longer, 5));
            if let Some((last, head)) = u.split_last() {
                targets.push(lookup_key(head, 5));
                let mut below = head.to_vec();
                below.push(last.wrapping_sub(1));
                targets.push(lookup_key(&below, 5));
            }
        }
        for t in &targets {
            assert_eq!(probed.restart_before(t), plain.restart_before(t), "{t:?}");
        }
        let searches: Vec<(&Block, &[u8])> =
            targets.iter().map(|t| (&probed, t.as_slice())).collect();
        let mut found = Vec::new();
        Block::restarts_before(&searches, &mut found);
        let expected: Vec<Option<u32>> = targets.iter().map(|t| plain.restart_before(t)).collect();
        assert_eq!(found, expected);
        // Bounds a batch already knows (from the first and last of its sorted keys) are
        // intersected with the words' own.
        let mut sorted: Vec<&[u8]> = targets.iter().map(|t| t.as_slice()).collect();
        sorted.sort_by(|a, b| compare_internal(a, b));
        let (lo, hi) = (
            plain.restart_before(sorted[0]).unwrap(),
            plain.restart_before(sorted[sorted.len() - 1]).unwrap(),
        );
        let searches: Vec<(&Block, &[u8])> = sorted.iter().map(|t| (&probed, *t)).collect();
        Block::restarts_within(&searches, vec![(lo, hi); sorted.len()], &mut found);
        let expected: Vec<Option<u32>> = sorted.iter().map(|t| plain.restart_before(t)).collect();
        assert_eq!(found, expected, "bounded");
    }
    // The words narrow the search of zero-padded decimal keys ending in a short successor to
    // a restart or two, not the whole block.
    let mut b = BlockBuilder::new(1);
    for i in 0..1000u32 {
        b.add(
            &internal_key(format!("{:016}", i * 3).as_bytes(), 1, 1),
            b"h",
        );
    }
    b.add(&internal_key(b"1", 1, 1), b"h");
    let block = Block::new_index(b.finish(), Path::new("t")).unwrap();
    let probes = block.probes.as_ref().unwrap();
    for i in [0u32, 1, 500, 1499, 2997, 2998, 4000] {
        let (lo, hi) = probes.narrow(&lookup_key(format!("{i:016}").as_bytes(), 5));
        assert!(hi - lo <= 1, "{i}: restarts {lo}..={hi}");
    }
    // Too few restarts, or a damaged one: no words, so the search meets the damage as before.
    let (small, _) = build(20, 1);
    assert!(
        Block::new_index(small.data().to_vec(), Path::new("t"))
            .unwrap()
            .probes
            .is_none()
    );
    let (whole, _) = build(100, 1);
    let mut data = whole.data().to_vec();
    let at = whole.restart(50);
    data[at] = 1; // a restart entry claiming to share bytes with the entry before
    let damaged = Block::new_index(data, Path::new("t")).unwrap();
    assert!(damaged.probes.is_none());
    assert_eq!(damaged.restart_before(&lookup_key(b"key00100", 5)), None);
}

#[test]
fn seek_finds_first_at_or_after() {
    let (block, _) = build(100, 16);
    let mut it = block.iter();
    it.seek(&lookup_key(b"key00051", 100));
    assert_eq!(user_key(it.key()), b"key00052");
    it.seek(&lookup_key(b"key00000", 100));
    assert_eq!(user_key(it.key()), b"key00000");
    it.seek(&lookup_key(b"zzz", 100));
    assert!(!it.valid());
    it.seek_for_prev(&lookup_key(b"key00051", 100));
    assert_eq!(user_key(it.key()), b"key00050");
    it.prev();
    assert_eq!(user_key(it.key()), b"key00048");
}

#[test]
fn a_restart_key_shorter_than_a_trailer_is_damage_not_a_panic() {
    // Found by the `block` fuzz target: two entries whose whole keys are 2 bytes, each at a
    // restart point, then the restart array [0, 5] and its count; a seek compares the second.
    let data = vec![
        0, 2, 0, b'a', b'b', 0, 2, 0, b'c', b'd', 0, 0, 0, 0, 5, 0, 0, 0, 2, 0, 0, 0,
    ];
    let block = Arc::new(Block::new(data, std::path::Path::new("t.sst")).unwrap());
    let mut it = block.iter();
    it.seek(&crate::key::lookup_key(b"key", 5));
    assert!(!it.valid());
}

#[test]
fn damaged_blocks_are_rejected_or_flagged() {
    assert!(Block::new(vec![1, 2], Path::new("t")).is_err());
    assert!(Block::new(vec![0, 0, 0, 0], Path::new("t")).is_err());
    assert!(Block::new(vec![0xff, 0xff, 0xff, 0xff], Path::new("t")).is_err());
    let (block, _) = build(10, 4);
    let mut data = block.data().to_vec();
    data[1] = 0xff; // the unshared length becomes a 2-byte varint far past the block
    data[2] = 0x7f;
    let block = Arc::new(Block::new(data, Path::new("t")).unwrap());
    let mut it = block.iter();
    it.seek_to_first();
    assert!(!it.valid());
    assert!(it.error_detail().is_some());
}
