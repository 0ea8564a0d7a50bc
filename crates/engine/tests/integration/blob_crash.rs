//! Blob files through damage, crashes and power loss: a damaged record is corruption naming
//! its file, a crash copy opens whole, a torn tail is found, and a synced write makes the blob
//! file it filled durable before its seal.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use std::path::Path;
use std::sync::Arc;

use crate::blob::{NOW, big, options};
use crate::common::{self, crash_copy, files_with_extension};
use strata_engine::fs::FaultInjectionFs;
use strata_engine::{BlobFileState, Db, ManualClock, Options, ReadOptions, WriteOptions};

#[test]
fn a_damaged_blob_record_is_corruption_naming_the_file() {
    let dir = crate::common::tempdir();
    let clock = Arc::new(ManualClock::new(NOW));
    let mut o = options(&clock);
    o.cache_size = 0;
    o.blob_compression = strata_engine::Compression::None;
    {
        let db = Db::open(dir.path(), o.clone()).unwrap();
        db.put("victim", vec![b'v'; 500]).unwrap();
    }
    let blob = files_with_extension(dir.path(), "blob").remove(0);
    let mut data = std::fs::read(&blob).unwrap();
    let n = data.len();
    data[n - 100] ^= 0xff; // inside the value, before the footer
    std::fs::write(&blob, &data).unwrap();
    let db = Db::open(dir.path(), o).unwrap();
    match db.get("victim") {
        Err(strata_engine::Error::Corruption { file, .. }) => assert_eq!(file, blob),
        other => panic!("{other:?}"),
    }
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    assert!(!it.valid());
    assert!(it.status().unwrap_err().is_corruption());
}

#[test]
fn a_crash_copy_of_a_live_store_opens_whole_and_gives_back_reserved_space() {
    let dir = crate::common::tempdir();
    let copy = crate::common::tempdir();
    let clock = Arc::new(ManualClock::new(NOW));
    let o = options(&clock);
    let db = Db::open(dir.path(), o.clone()).unwrap();
    for i in 0..10u32 {
        db.put(format!("k{i}"), big(i, b'w')).unwrap();
    }
    // The open blob file as a process crash leaves it (with whatever its writer reserved).
    crash_copy(dir.path(), copy.path());
    drop(db);
    let blob = files_with_extension(copy.path(), "blob").remove(0);
    let copied = std::fs::read(&blob).unwrap();
    let db = Db::open(copy.path(), o.clone()).unwrap();
    assert_eq!(db.statistics().blob_torn_files, 0);
    for i in 0..10u32 {
        assert_eq!(
            db.get(format!("k{i}")).unwrap().unwrap().as_ref(),
            big(i, b'w').as_slice()
        );
    }
    let file_size = db.properties_cf(&db.default_cf()).unwrap().blob_files[0].file_size;
    assert!(file_size < o.blob_file_size);
    let trimmed = std::fs::read(&blob).unwrap();
    assert_eq!(
        trimmed.len() as u64,
        file_size,
        "the reserved zeros are gone"
    );
    assert_eq!(trimmed[..], copied[..trimmed.len()]);
    assert!(copied[trimmed.len()..].iter().all(|&b| b == 0));
    drop(db);
    let db = Db::open(copy.path(), o).unwrap();
    assert_eq!(
        db.get("k9").unwrap().unwrap().as_ref(),
        big(9, b'w').as_slice()
    );
}

#[test]
fn a_torn_blob_file_tail_is_detected_and_recovery_stops_before_it() {
    // A blob file may be extended ahead of its writer, so the copy can end in zeros past the
    // last record; a crash mid-write leaves that record either cut short or with its end still
    // zero. Both are torn, unlike zeros after whole records.
    for zeroed in [false, true] {
        torn_blob_record_is_detected(zeroed);
    }
}

/// A crash's copy of a store after ten synced puts of values (filled with `fill`) in its one
/// blob file, left unsealed; and the options it was written with.
fn crash_copy_after_synced_puts(fill: u8) -> (tempfile::TempDir, Options) {
    let dir = crate::common::tempdir();
    let copy = crate::common::tempdir();
    let clock = Arc::new(ManualClock::new(NOW));
    let o = options(&clock);
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let sync = WriteOptions {
        sync: true,
        ..Default::default()
    };
    for i in 0..10u32 {
        db.put_with(&sync, format!("k{i}"), big(i, fill)).unwrap();
    }
    crash_copy(dir.path(), copy.path());
    drop(db);
    (copy, o)
}

fn torn_blob_record_is_detected(zeroed: bool) {
    let (copy, o) = crash_copy_after_synced_puts(b't');
    let sync = WriteOptions {
        sync: true,
        ..Default::default()
    };
    let blob = files_with_extension(copy.path(), "blob").remove(0);
    let mut data = std::fs::read(&blob).unwrap();
    let records_end = data.iter().rposition(|&b| b != 0).unwrap() + 1;
    if zeroed {
        data[records_end - 20..records_end].fill(0);
    } else {
        data.truncate(records_end - 20);
    }
    std::fs::write(&blob, &data).unwrap();
    // What a kill leaves is no damage: `verify` notes the record cut short, as it notes a WAL's.
    let report = strata_engine::verify_store(copy.path(), &o).unwrap();
    assert!(report.is_ok(), "zeroed: {zeroed}: {:?}", report.files);
    let name = blob.file_name().unwrap().to_string_lossy();
    let noted = report.files.iter().find(|f| f.name == name).unwrap();
    assert!(
        noted.note.as_deref().unwrap_or("").contains("cut short"),
        "{noted:?}"
    );
    let db = Db::open(copy.path(), o).unwrap();
    assert_eq!(db.statistics().blob_torn_files, 1, "zeroed: {zeroed}");
    for i in 0..9u32 {
        assert_eq!(
            db.get(format!("k{i}")).unwrap().unwrap().as_ref(),
            big(i, b't').as_slice()
        );
    }
    assert!(
        db.get("k9").unwrap().is_none(),
        "the torn write is not replayed"
    );
    // The torn file is never appended to again; new writes go to a new file and survive.
    db.put_with(&sync, "after", big(77, b'n')).unwrap();
    drop(db);
    let db = Db::open(copy.path(), options(&Arc::new(ManualClock::new(NOW)))).unwrap();
    assert_eq!(
        db.get("after").unwrap().unwrap().as_ref(),
        big(77, b'n').as_slice()
    );
    assert_eq!(
        db.get("k8").unwrap().unwrap().as_ref(),
        big(8, b't').as_slice()
    );
}

/// A blob file a crash left unsealed stays so on disk after recovery, its records now named by
/// tables: cut short later (damage, not a crash: the tables vouch for every record), `verify`
/// blames it, though its tail alone looks like an append cut short.
#[test]
fn verify_blames_an_unsealed_blob_file_cut_below_what_tables_need() {
    let (copy, o) = crash_copy_after_synced_puts(b'u');
    // Recovery replays the WAL into a table and trims the reserved zeros; the file stays unsealed.
    let db = Db::open(copy.path(), o.clone()).unwrap();
    db.flush().unwrap();
    drop(db);
    assert!(
        strata_engine::verify_store(copy.path(), &o)
            .unwrap()
            .is_ok()
    );
    let blob = files_with_extension(copy.path(), "blob").remove(0);
    let data = std::fs::read(&blob).unwrap();
    std::fs::write(&blob, &data[..data.len() - 20]).unwrap();
    let report = strata_engine::verify_store(copy.path(), &o).unwrap();
    let name = blob.file_name().unwrap().to_string_lossy();
    let damaged: Vec<&str> = report.damaged().map(|f| f.name.as_str()).collect();
    assert_eq!(damaged, [name.as_ref()], "{:?}", report.files);
    let problem = report.damaged().next().unwrap().problem.clone().unwrap();
    assert!(problem.contains("table"), "{problem}");
}

/// Makes creating a table wait while `held` is set: a flush stuck there keeps the one background
/// thread from anything else.
#[derive(Debug, Default)]
struct HeldFlushes {
    held: std::sync::Mutex<bool>,
    changed: std::sync::Condvar,
    flush_waiting: std::sync::atomic::AtomicBool,
}

impl HeldFlushes {
    fn wait_if_table(&self, path: &Path) {
        if path.extension().is_some_and(|e| e == "sst") {
            let mut held = self.held.lock().unwrap();
            self.flush_waiting
                .store(true, std::sync::atomic::Ordering::SeqCst);
            while *held {
                held = self.changed.wait(held).unwrap();
            }
        }
    }

    fn release(&self) {
        *self.held.lock().unwrap() = false;
        self.changed.notify_all();
    }
}

/// A full blob file is sealed (footer, sync) by a background job, not by the write that filled
/// it. Until then a synced write must still sync it: the WAL it syncs vouches for the indexes
/// pointing into it.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn a_synced_write_makes_a_full_blob_file_durable_before_its_seal() {
    let dir = crate::common::tempdir();
    let clock = Arc::new(ManualClock::new(NOW));
    let power = FaultInjectionFs::new();
    let flushes = Arc::new(HeldFlushes::default());
    *flushes.held.lock().unwrap() = true;
    let mut o = options(&clock);
    o.filesystem = {
        let flushes = flushes.clone();
        Arc::new(common::HookedFs::new(
            Arc::new(power.clone()),
            move |path| {
                flushes.wait_if_table(path);
                Ok(())
            },
        ))
    };
    o.max_background_jobs = 1;
    o.blob_file_size = 8 << 10;
    o.write_buffer_size = 16 << 10;
    let db = Db::open(dir.path(), o.clone()).unwrap();
    db.put("small", "inline").unwrap();
    std::thread::scope(|s| {
        // A flush held at its table keeps the only background thread from sealing anything.
        let flusher = s.spawn(|| db.flush());
        let mut waited = 0;
        while !flushes
            .flush_waiting
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            assert!(waited < 60_000, "the flush never reached its table");
            std::thread::sleep(std::time::Duration::from_millis(1));
            waited += 1;
        }
        for i in 0..40u32 {
            db.put(format!("k{i:04}"), big(i, b'f')).unwrap();
        }
        let props = db.properties_cf(&db.default_cf()).unwrap();
        assert!(
            props
                .blob_files
                .iter()
                .any(|b| b.state == BlobFileState::Open && b.file_size >= o.blob_file_size),
            "a full file waits for its seal: {:?}",
            props.blob_files
        );
        let synced = WriteOptions {
            sync: true,
            ..Default::default()
        };
        db.put_with(&synced, "last", big(99, b's')).unwrap();
        // Power loss before the seal could run; the held flush then fails.
        power.deactivate();
        flushes.release();
        assert!(flusher.join().unwrap().is_err());
    });
    drop(db);
    power.drop_unsynced_data().unwrap();
    let db = Db::open(dir.path(), o).unwrap();
    for i in 0..40u32 {
        let got = db.get(format!("k{i:04}")).unwrap();
        assert_eq!(got.as_deref(), Some(big(i, b'f').as_slice()), "k{i:04}");
    }
    assert_eq!(
        db.get("last").unwrap().as_deref(),
        Some(big(99, b's').as_slice())
    );
}
