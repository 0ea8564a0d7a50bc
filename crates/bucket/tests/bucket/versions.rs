//! Versions of a store in a real SeaweedFS bucket: checkpoints that open as they were and that
//! garbage collection spares while a writer compacts under it, readers' leases, clones that
//! refer to their source and never change it. Backups are in `backups`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use strata_bucket::{BucketConfig, BucketFs, BucketUrl, Client, Durability, checkpoint};
use strata_engine::{Db, ErrorKind, Options, WriteBatch};

use crate::support::seaweed::{self, Seaweed};
use crate::support::{get, open_db, synced};

pub(crate) fn client(s: &Seaweed, url: &BucketUrl) -> Client {
    Client::connect(url, Some(&s.endpoint), Some(&seaweed::credentials())).unwrap()
}

/// A client for `url` whose requests meet the faults of the plan it comes with.
pub(crate) fn faulty_client(
    s: &Seaweed,
    url: &BucketUrl,
) -> (Client, Arc<strata_bucket::FaultPlan>) {
    let faults = strata_bucket::FaultPlan::new();
    let client = Client::connect_with_faults(
        url,
        Some(&s.endpoint),
        Some(&seaweed::credentials()),
        Some(faults.clone()),
    )
    .unwrap();
    (client, faults)
}

pub(crate) fn writer(s: &Seaweed, url: &BucketUrl, cache: &Path) -> (BucketFs, Db) {
    let fs = BucketFs::open(&s.config(url, cache.to_path_buf(), Durability::Remote)).unwrap();
    (fs.clone(), open_db(fs))
}

/// The store at `url` (or its checkpoint), read-only, from an empty cache.
pub(crate) fn reader(s: &Seaweed, url: &BucketUrl, checkpoint: Option<&str>) -> Db {
    let cache = tempfile::tempdir().unwrap().keep();
    let fs = BucketFs::open(&BucketConfig {
        read_only: true,
        checkpoint: checkpoint.map(str::to_string),
        ..s.config(url, cache, Durability::Remote)
    })
    .unwrap();
    let root = fs.root().to_path_buf();
    let opts = Options {
        filesystem: Arc::new(fs),
        ..Options::default()
    };
    Db::open_read_only(&root, opts).unwrap()
}

/// The readers' leases among `c`'s pins, by name.
pub(crate) fn leases_in(c: &Client) -> Vec<String> {
    checkpoint::list(c)
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .filter(|n| n.starts_with("lease-"))
        .collect()
}

pub(crate) fn key(i: usize) -> String {
    format!("key-{i:05}")
}

/// Writes the keys in `range` in synced batches of 100 (a record each), then flushes.
pub(crate) fn fill(db: &Db, range: std::ops::Range<usize>, tag: &str) {
    let keys: Vec<usize> = range.collect();
    for chunk in keys.chunks(100) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            batch.put(key(i), format!("{tag}-{i}"));
        }
        db.write(batch, &synced()).unwrap();
    }
    db.flush().unwrap();
}

/// Enough small synced writes for the log to take two checkpoints and drop the records before
/// them: until then every object a record ever named counts as reachable.
pub(crate) fn churn_log(db: &Db) {
    for i in 0..200 {
        db.put_with(&synced(), b"churn", format!("{i}").as_bytes())
            .unwrap();
    }
}

pub(crate) fn assert_tagged(db: &Db, range: std::ops::Range<usize>, tag: &str) {
    for i in range {
        assert_eq!(
            get(db, &key(i)),
            Some(format!("{tag}-{i}").into_bytes()),
            "{}",
            key(i)
        );
    }
}

#[test]
fn a_checkpoint_opens_as_it_was_and_garbage_collection_spares_it_until_dropped() {
    let Some(s) = seaweed::shared() else { return };
    let url = s.fresh_url("checkpoint");
    let c = client(s, &url);
    let tmp = tempfile::tempdir().unwrap();
    let (fs, db) = writer(s, &url, &tmp.path().join("w"));
    fill(&db, 0..300, "old");
    let made = checkpoint::create(&c, "before-rewrite").unwrap();
    assert!(made.files > 0 && made.objects > 0, "{made:?}");
    let e = checkpoint::create(&c, "before-rewrite").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    for bad in [
        "../x",
        "lease-00000000000000000001-x",
        "clone-1",
        "backup-1",
    ] {
        let e = checkpoint::create(&c, bad).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad}: {e}");
    }
    // Everything rewritten and compacted: the old tables are named by nothing but the pin.
    fill(&db, 0..300, "new");
    db.compact_range(None, None).unwrap();
    churn_log(&db);
    let gc = fs.collect_garbage(Duration::ZERO).unwrap();
    assert_eq!(gc.held, 0);
    assert_tagged(&reader(s, &url, Some("before-rewrite")), 0..300, "old");
    assert_tagged(&reader(s, &url, None), 0..300, "new");
    let listed = checkpoint::list(&c).unwrap();
    assert_eq!(listed, vec![made.clone()]);
    // A checkpoint is a version of the past: it opens to read only.
    let e = BucketFs::open(&BucketConfig {
        checkpoint: Some("before-rewrite".into()),
        ..s.config(&url, tmp.path().join("rw"), Durability::Remote)
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ReadOnly, "{e}");
    // Nor in a writer's working copy, which it would lose what only it holds from.
    drop(db);
    drop(fs);
    let e = BucketFs::open(&BucketConfig {
        read_only: true,
        checkpoint: Some("before-rewrite".into()),
        ..s.config(&url, tmp.path().join("w"), Durability::Remote)
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let (fs, db) = writer(s, &url, &tmp.path().join("w"));
    assert_tagged(&db, 0..300, "new");
    // A maker's marker stops garbage collection; dropping the pin lets it go on.
    c.put_create("pinning/someone", Bytes::from_static(b"0"))
        .unwrap();
    checkpoint::drop(&c, "before-rewrite").unwrap();
    let held = fs.collect_garbage(Duration::ZERO).unwrap();
    assert_eq!((held.held, held.deleted), (1, 0), "{held:?}");
    c.delete("pinning/someone").unwrap();
    let freed = fs.collect_garbage(Duration::ZERO).unwrap();
    assert!(
        freed.deleted >= made.objects / 2,
        "{freed:?} after {made:?}"
    );
    let e = checkpoint::drop(&c, "before-rewrite").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert_tagged(&reader(s, &url, None), 0..300, "new");
}

#[test]
fn a_reader_leases_its_version_so_garbage_collection_keeps_it_until_it_closes() {
    let Some(s) = seaweed::shared() else { return };
    let url = s.fresh_url("lease");
    let c = client(s, &url);
    let tmp = tempfile::tempdir().unwrap();
    let (fs, db) = writer(s, &url, &tmp.path().join("w"));
    fill(&db, 0..300, "old");
    let leases = || leases_in(&c);
    let reading = reader(s, &url, None);
    let held = leases();
    assert_eq!(held.len(), 1, "{held:?}");
    let pinned = checkpoint::read(&c, &held[0]).unwrap().objects();
    assert!(!pinned.is_empty());
    // The writer rewrites and compacts everything and collects at once: the reader's version
    // stays whole in the bucket.
    fill(&db, 0..300, "new");
    db.compact_range(None, None).unwrap();
    churn_log(&db);
    fs.collect_garbage(Duration::ZERO).unwrap();
    for (key, _, _) in &pinned {
        assert!(c.head(key).unwrap().is_some(), "{key} went under a reader");
    }
    assert_tagged(&reading, 0..300, "old");
    drop(reading);
    assert!(leases().is_empty(), "the lease outlived its reader");
    let freed = fs.collect_garbage(Duration::ZERO).unwrap();
    assert!(freed.deleted > 0, "{freed:?}");
    assert!(
        pinned
            .iter()
            .any(|(key, _, _)| c.head(key).unwrap().is_none())
    );
    // A lease whose reader died lapses: what only it kept goes with it.
    fill(&db, 0..300, "newer");
    let made = checkpoint::create(&c, "copy").unwrap();
    let stale = checkpoint::read(&c, &made.name).unwrap();
    c.put_create(
        "pin/lease-00000000000000000001-dead-reader",
        Bytes::from(stale.encode()),
    )
    .unwrap();
    checkpoint::drop(&c, "copy").unwrap();
    fill(&db, 0..300, "newest");
    db.compact_range(None, None).unwrap();
    churn_log(&db);
    let swept = fs.collect_garbage(Duration::ZERO).unwrap();
    assert_eq!(swept.lapsed_leases, 1, "{swept:?}");
    assert!(leases().is_empty());
    assert!(
        stale
            .objects()
            .iter()
            .any(|(key, _, _)| c.head(key).unwrap().is_none()),
        "a lapsed lease still kept its objects"
    );
    // Judged by the bucket's clock, not the expiry its holder wrote: a lease whose holder's
    // clock runs almost an hour behind holds while the bucket saw it renewed within its time;
    // one the bucket has not seen renewed for its time lapses, whatever expiry it claims.
    let now_millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let slow = format!("lease-{:020}-600s-slow-clock", now_millis - 3_000_000);
    let quiet = format!("lease-{:020}-1s-quiet-reader", now_millis + 86_400_000);
    for name in [&slow, &quiet] {
        c.put_create(&format!("pin/{name}"), Bytes::from(stale.encode()))
            .unwrap();
    }
    std::thread::sleep(Duration::from_secs(4));
    let swept = fs.collect_garbage(Duration::ZERO).unwrap();
    assert_eq!(swept.lapsed_leases, 1, "{swept:?}");
    assert_eq!(leases(), vec![slow.clone()], "the wrong lease lapsed");
    checkpoint::drop(&c, &slow).unwrap();
}

#[test]
fn a_pin_put_while_collection_lists_is_seen_by_it() {
    // The maker replays, then its pin's PUT is held back while the writer compacts its table
    // away and a collection pass reads the records; that pass's listing of the markers is held
    // back in turn until the pin is in and the marker gone. Collection must still spare what
    // the pin names (read records, then markers, then pins).
    let Some(s) = seaweed::shared() else { return };
    let url = s.fresh_url("pin-order");
    let tmp = tempfile::tempdir().unwrap();
    let writer_faults = strata_bucket::FaultPlan::new();
    let fs = BucketFs::open(&BucketConfig {
        faults: Some(writer_faults.clone()),
        ..s.config(&url, tmp.path().join("w"), Durability::Remote)
    })
    .unwrap();
    let db = open_db(fs.clone());
    fill(&db, 0..300, "old");
    let (maker, maker_faults) = faulty_client(s, &url);
    use strata_bucket::{Fault, Request};
    maker_faults.inject(
        Request::Put,
        "pin/late",
        Fault::Delay(Duration::from_secs(6)),
        1,
    );
    std::thread::scope(|scope| {
        let made = scope.spawn(|| checkpoint::create(&maker, "late").unwrap());
        std::thread::sleep(Duration::from_millis(500));
        fill(&db, 0..300, "new");
        db.compact_range(None, None).unwrap();
        churn_log(&db);
        writer_faults.inject(
            Request::List,
            "pinning",
            Fault::Delay(Duration::from_secs(8)),
            1,
        );
        let gc = fs.collect_garbage(Duration::ZERO).unwrap();
        eprintln!("{gc:?}");
        made.join().unwrap();
    });
    let pin = checkpoint::read(&client(s, &url), "late").unwrap();
    for (key, _, _) in pin.objects() {
        assert!(
            client(s, &url).head(&key).unwrap().is_some(),
            "{key} went under a pin"
        );
    }
    assert_tagged(&reader(s, &url, Some("late")), 0..300, "old");
}

#[test]
fn a_clone_whose_record_landed_unanswered_keeps_its_source_pin() {
    let Some(s) = seaweed::shared() else { return };
    let (src_url, dst_url) = (s.fresh_url("lost-src"), s.fresh_url("lost-dst"));
    let tmp = tempfile::tempdir().unwrap();
    let (_fs, db) = writer(s, &src_url, &tmp.path().join("src"));
    fill(&db, 0..100, "v");
    let (dst, faults) = faulty_client(s, &dst_url);
    // The clone's record 1 lands but its answer is lost, and the S3 client's own retry finds
    // it there: the clone is made, and the pin that keeps its objects stays.
    faults.inject(
        strata_bucket::Request::Put,
        "log/",
        strata_bucket::Fault::LoseAnswer,
        1,
    );
    let made = strata_bucket::clone_store(&client(s, &src_url), &dst, None, &|_| {}).unwrap();
    let pins = checkpoint::list(&client(s, &src_url)).unwrap();
    assert_eq!(
        pins.iter().map(|p| Some(&p.name)).collect::<Vec<_>>(),
        [made.source_pin.as_ref()]
    );
    assert_tagged(&reader(s, &dst_url, None), 0..100, "v");
}

#[test]
fn a_readers_lease_is_renewed_and_reports_when_it_lapses() {
    let Some(s) = seaweed::shared() else { return };
    let url = s.fresh_url("renew");
    let c = client(s, &url);
    let tmp = tempfile::tempdir().unwrap();
    {
        let (_fs, db) = writer(s, &url, &tmp.path().join("w"));
        fill(&db, 0..10, "v");
    }
    let faults = strata_bucket::FaultPlan::new();
    let fs = BucketFs::open(&BucketConfig {
        read_only: true,
        reader_lease: Duration::from_secs(2),
        faults: Some(faults.clone()),
        ..s.config(&url, tmp.path().join("r"), Durability::Remote)
    })
    .unwrap();
    let (first, lapsed) = fs.reader_lease().expect("a reader holds a lease");
    assert!(!lapsed);
    let pins = || -> Vec<String> {
        checkpoint::list(&c)
            .unwrap()
            .into_iter()
            .map(|i| i.name)
            .collect()
    };
    assert_eq!(pins(), std::slice::from_ref(&first));
    // Renewed every fifth of its time: a later expiry under a new name, the old one gone.
    std::thread::sleep(Duration::from_millis(1500));
    let (renewed, lapsed) = fs.reader_lease().unwrap();
    assert!(!lapsed);
    assert!(renewed > first, "{renewed} after {first}");
    assert_eq!(pins(), [renewed]);
    // The bucket refuses every renewal: once its time has passed, the reader says so.
    faults.inject(
        strata_bucket::Request::Put,
        "pin/lease-",
        strata_bucket::Fault::Refuse,
        1000,
    );
    std::thread::sleep(Duration::from_millis(3500));
    assert!(fs.reader_lease().unwrap().1, "the lease lapsed unreported");
}

/// Each key's value is its round: a version of the store is some prefix of the writes, so the
/// rounds never rise along the keys and span at most two.
fn assert_consistent(db: &Db, keys: usize, name: &str) {
    let rounds: Vec<u64> = (0..keys)
        .filter_map(|i| get(db, &key(i)))
        .map(|v| String::from_utf8(v).unwrap().parse().unwrap())
        .collect();
    assert!(
        rounds.windows(2).all(|w| w[0] >= w[1] && w[0] - w[1] <= 1),
        "{name}: {rounds:?}"
    );
}

#[test]
fn checkpoints_made_while_a_writer_compacts_and_garbage_is_collected_all_open() {
    let Some(s) = seaweed::shared() else { return };
    let url = s.fresh_url("pin-race");
    let c = client(s, &url);
    let tmp = tempfile::tempdir().unwrap();
    let (fs, db) = writer(s, &url, &tmp.path().join("w"));
    const KEYS: usize = 60;
    let done = Arc::new(AtomicBool::new(false));
    let deleted = Arc::new(AtomicUsize::new(0));
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for round in 1..=8u64 {
                for i in 0..KEYS {
                    db.put_with(&synced(), key(i).as_bytes(), round.to_string().as_bytes())
                        .unwrap();
                }
                db.flush().unwrap();
                if round % 2 == 0 {
                    db.compact_range(None, None).unwrap();
                }
            }
            done.store(true, Ordering::SeqCst);
        });
        scope.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                let r = fs.collect_garbage(Duration::ZERO).unwrap();
                deleted.fetch_add(r.deleted, Ordering::SeqCst);
            }
        });
        let mut n = 0;
        while !done.load(Ordering::SeqCst) {
            checkpoint::create(&c, &format!("c{n}")).unwrap();
            n += 1;
            // Not back to back: a marker always present would hold garbage collection off.
            std::thread::sleep(Duration::from_millis(150));
        }
    });
    deleted.fetch_add(
        fs.collect_garbage(Duration::ZERO).unwrap().deleted,
        Ordering::SeqCst,
    );
    let pins = checkpoint::list(&c).unwrap();
    eprintln!(
        "{} checkpoints, {} objects deleted meanwhile",
        pins.len(),
        deleted.load(Ordering::SeqCst)
    );
    assert!(pins.len() >= 2, "{pins:?}");
    for pin in &pins {
        assert_consistent(&reader(s, &url, Some(&pin.name)), KEYS, &pin.name);
    }
    // What the pins kept was garbage all along: without them it goes.
    for pin in &pins {
        checkpoint::drop(&c, &pin.name).unwrap();
    }
    let freed = fs.collect_garbage(Duration::ZERO).unwrap();
    assert!(freed.deleted > 0, "{freed:?}");
    assert_consistent(&reader(s, &url, None), KEYS, "newest");
}

/// Every object under the store's prefix but its pins, with its length.
fn objects(c: &Client) -> Vec<String> {
    ["data/", "log/", "checkpoint/"]
        .iter()
        .flat_map(|d| c.list(d).unwrap())
        .collect()
}

#[test]
fn a_clone_refers_to_its_source_copies_nothing_and_writes_never_touch_the_source() {
    let Some(s) = seaweed::shared() else { return };
    let src_url = s.fresh_url("clone-src");
    let dst_url = s.fresh_url("clone-dst");
    let (src, dst) = (client(s, &src_url), client(s, &dst_url));
    let tmp = tempfile::tempdir().unwrap();
    let (src_fs, src_db) = writer(s, &src_url, &tmp.path().join("src"));
    fill(&src_db, 0..1000, "source");
    let before = src.requests();
    let made = strata_bucket::clone_store(&src, &dst, None, &|_| {}).unwrap();
    let spent = src.requests().gets + src.requests().puts + src.requests().lists
        - before.gets
        - before.puts
        - before.lists
        + dst.requests().gets
        + dst.requests().puts
        + dst.requests().lists;
    eprintln!("clone: {made:?}, {spent} requests");
    assert_eq!(made.objects_copied, 0);
    assert!(made.objects_referred > 0);
    assert!(spent < 100, "{spent} requests");
    let source_objects = objects(&src);
    // The clone is a store of its own: written, flushed, compacted, collected.
    {
        let (clone_fs, clone_db) = writer(s, &dst_url, &tmp.path().join("dst"));
        assert_tagged(&clone_db, 0..1000, "source");
        fill(&clone_db, 0..500, "clone");
        clone_db.compact_range(None, None).unwrap();
        clone_fs.collect_garbage(Duration::ZERO).unwrap();
    }
    assert_eq!(
        objects(&src),
        source_objects,
        "the clone changed its source"
    );
    // The source rewrites everything and collects its garbage: the pin keeps the clone whole.
    fill(&src_db, 0..1000, "rewritten");
    src_db.compact_range(None, None).unwrap();
    churn_log(&src_db);
    let gc = src_fs.collect_garbage(Duration::ZERO).unwrap();
    assert!(gc.deleted > 0, "{gc:?}");
    let clone = reader(s, &dst_url, None);
    assert_tagged(&clone, 0..500, "clone");
    assert_tagged(&clone, 500..1000, "source");
    assert_tagged(&reader(s, &src_url, None), 0..1000, "rewritten");
    let pins = checkpoint::list(&src).unwrap();
    assert_eq!(pins.len(), 1);
    assert_eq!(Some(&pins[0].name), made.source_pin.as_ref());
    assert_eq!(pins[0].source, dst_url.to_string());
    drop(clone);
    // Once the clone has rewritten every key, it refers to nothing of its source's: its own
    // garbage collection drops the source's pin, and the source's may then take what it kept.
    {
        let (clone_fs, clone_db) = writer(s, &dst_url, &tmp.path().join("dst"));
        let gc = clone_fs.collect_garbage(Duration::ZERO).unwrap();
        assert!(
            !gc.released_source,
            "released while still referring: {gc:?}"
        );
        fill(&clone_db, 0..1000, "own");
        clone_db.compact_range(None, None).unwrap();
        churn_log(&clone_db);
        let gc = clone_fs.collect_garbage(Duration::ZERO).unwrap();
        assert!(gc.released_source, "{gc:?}");
    }
    assert!(checkpoint::list(&src).unwrap().is_empty());
    churn_log(&src_db);
    src_fs.collect_garbage(Duration::ZERO).unwrap();
    assert_tagged(&reader(s, &dst_url, None), 0..1000, "own");
    // Into a store, or overlapping the source: refused.
    let e = strata_bucket::clone_store(&src, &dst, None, &|_| {}).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let inside = BucketUrl::parse(&format!("{src_url}/data/x")).unwrap();
    let e = strata_bucket::clone_store(&src, &client(s, &inside), None, &|_| {}).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    // From a checkpoint, into another bucket: copied, and the source keeps no pin for it.
    checkpoint::create(&src, "v").unwrap();
    let far = BucketUrl::parse(&format!("s3://strata-clones/far-{}", std::process::id())).unwrap();
    // SeaweedFS makes a bucket at its first PUT.
    client(s, &far).put_create("made", Bytes::new()).unwrap();
    let copied = strata_bucket::clone_store(&src, &client(s, &far), Some("v"), &|_| {}).unwrap();
    assert!(
        copied.objects_copied > 0 && copied.source_pin.is_none(),
        "{copied:?}"
    );
    assert_eq!(checkpoint::list(&src).unwrap().len(), 1);
    assert_tagged(&reader(s, &far, None), 0..1000, "rewritten");
}

#[test]
fn a_clone_of_a_clone_reads_on_while_both_sources_rewrite_and_collect() {
    let Some(s) = seaweed::shared() else { return };
    let urls = [
        s.fresh_url("chain-s"),
        s.fresh_url("chain-a"),
        s.fresh_url("chain-b"),
    ];
    let [sc, ac, bc] = urls.clone().map(|u| client(s, &u));
    let tmp = tempfile::tempdir().unwrap();
    let (s_fs, s_db) = writer(s, &urls[0], &tmp.path().join("s"));
    fill(&s_db, 0..300, "s");
    strata_bucket::clone_store(&sc, &ac, None, &|_| {}).unwrap();
    let (a_fs, a_db) = writer(s, &urls[1], &tmp.path().join("a"));
    fill(&a_db, 0..100, "a");
    strata_bucket::clone_store(&ac, &bc, None, &|_| {}).unwrap();
    // Both rewrite and compact everything and collect at once. The middle one refers to
    // nothing of its source's any more, but its clone does, through the middle one's pin.
    for (db, tag) in [(&s_db, "s2"), (&a_db, "a2")] {
        fill(db, 0..300, tag);
        db.compact_range(None, None).unwrap();
        churn_log(db);
    }
    let a_gc = a_fs.collect_garbage(Duration::ZERO).unwrap();
    assert!(!a_gc.released_source, "{a_gc:?}");
    let s_gc = s_fs.collect_garbage(Duration::ZERO).unwrap();
    assert!(s_gc.deleted > 0, "{s_gc:?}");
    let b = reader(s, &urls[2], None);
    assert_tagged(&b, 0..100, "a");
    assert_tagged(&b, 100..300, "s");
}
