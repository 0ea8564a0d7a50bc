//! A small demo keyspace for `make run`: path-like keys, a range deletion, large values with a
//! TTL in blob files, and a second column family.

use strata_engine::{Clock, ColumnFamilyOptions, Db, SystemClock, WriteBatch, WriteOptions};

/// Fills `db` when it holds nothing yet; returns whether it did.
pub fn seed_if_empty(db: &Db) -> Result<bool, String> {
    let err = |e: strata_engine::Error| e.to_string();
    let mut it = db.iter(&Default::default()).map_err(err)?;
    it.seek_to_first();
    if it.valid() || db.list_cf().len() > 2 {
        return Ok(false);
    }
    let now = SystemClock.now_secs();
    let mut batch = WriteBatch::new();
    let cf = db.default_cf();
    for i in 0..1000 {
        let user = format!(
            r#"{{"id": {i}, "name": "user{i}", "plan": "{}"}}"#,
            ["free", "pro"][i % 2]
        );
        batch.put_cf(&cf, format!("users/{i:04}.json"), user);
    }
    for day in 1..=30 {
        for n in 0..60 {
            let line = format!(
                "2026-11-{day:02}T{:02}:{:02}:00Z request {n} ok\n",
                n / 4,
                n % 60
            );
            batch.put_cf(&cf, format!("logs/2026-11-{day:02}/{n:03}.log"), line);
        }
    }
    // Large values live in blob files; these expire in a day.
    for i in 0..20u64 {
        let image: Vec<u8> = (0..(96u64 << 10)).map(|j| (j * 31 + i * 7) as u8).collect();
        batch.put_until_cf(&cf, format!("images/photo-{i:02}.bin"), image, now + 86_400);
    }
    batch.put_cf(
        &cf,
        "README.md",
        "# Strata demo\n\nusers/, logs/ and images/ are keys.\n",
    );
    db.write(batch, &WriteOptions::default()).map_err(err)?;
    // The first week of logs, gone in one range tombstone.
    db.delete_range_cf(&cf, "logs/2026-11-01/", "logs/2026-11-08/")
        .map_err(err)?;
    db.flush().map_err(err)?;
    let metrics = db
        .create_cf("metrics", ColumnFamilyOptions::default())
        .map_err(err)?;
    let mut batch = WriteBatch::new();
    for host in ["web-1", "web-2", "db-1"] {
        for t in 0..500 {
            batch.put_cf(
                &metrics,
                format!("cpu/{host}/{t:05}"),
                format!("{}", (t * 7 + host.len()) % 100),
            );
        }
    }
    db.write(batch, &WriteOptions::default()).map_err(err)?;
    Ok(true)
}
