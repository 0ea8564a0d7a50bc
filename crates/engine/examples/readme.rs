//! The README's engine example, run by `scripts/readme-test.sh` (a store in `./engine-data`).

use strata_engine::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

fn main() -> Result<(), strata_engine::Error> {
    let db = Db::open("./engine-data", Options::default())?;
    db.put("users/alice", "1")?;
    let mut batch = WriteBatch::new(); // atomic, even across a crash
    batch.put("users/bob", "2");
    batch.delete("users/alice");
    batch.delete_range("logs/", "logs0"); // every key in [start, end), one tombstone
    db.write(
        batch,
        &WriteOptions {
            sync: true,
            ..Default::default()
        },
    )?;

    let snapshot = db.snapshot();
    db.put("users/carol", "3")?; // after the snapshot: it does not see this
    let bob = db.get("users/bob")?; // no copy out of the block cache
    assert_eq!(bob.as_deref(), Some(&b"2"[..]));
    let both = db.multi_get(&ReadOptions::default(), &["users/bob", "users/carol"]); // batched
    assert_eq!(both.len(), 2);
    let at_snapshot = ReadOptions {
        snapshot: Some(snapshot),
        ..Default::default()
    };
    for entry in db.iter(&at_snapshot)?.forward() {
        let (key, value) = entry?;
        println!(
            "{} = {}",
            String::from_utf8_lossy(&key),
            String::from_utf8_lossy(&value)
        );
    }
    db.close()
}
