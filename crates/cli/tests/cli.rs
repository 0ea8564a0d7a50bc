//! The `strata` binary end to end: data commands, errors on stderr with a non-zero exit, and a
//! small bench run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

mod common;
use common::{stdout, strata};

/// `put --append` and `put --offset` change part of a value; `--offset` needs the key to exist.
#[test]
fn put_appends_and_writes_at_an_offset() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    stdout(&strata(&db, &["put", "--append", "log", "one"]));
    stdout(&strata(&db, &["put", "--append", "log", ",two", "--sync"]));
    stdout(&strata(&db, &["put", "--offset", "0", "log", "O"]));
    assert_eq!(stdout(&strata(&db, &["get", "log"])), "One,two\n");
    let missing = strata(&db, &["put", "--offset", "3", "nope", "x"]);
    assert!(!missing.status.success());
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("not found"), "{err}");
    let both = strata(&db, &["put", "--append", "--offset", "1", "log", "x"]);
    assert!(!both.status.success());
    assert_eq!(stdout(&strata(&db, &["get", "log"])), "One,two\n");
}

#[test]
fn put_get_scan_delete_stats() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    stdout(&strata(&db, &["put", "users/alice", "1"]));
    stdout(&strata(&db, &["put", "users/bob", "2", "--sync"]));
    // A level names how far; on the local disk both are an fsync. A wrong one is refused.
    stdout(&strata(&db, &["put", "users/carol", "3", "--sync=bucket"]));
    stdout(&strata(&db, &["delete", "users/carol", "--sync=local"]));
    let bad = strata(&db, &["put", "users/dan", "4", "--sync=disk"]);
    assert!(!bad.status.success());
    let why = String::from_utf8_lossy(&bad.stderr);
    assert!(why.contains("local") && why.contains("bucket"), "{why}");
    stdout(&strata(&db, &["put", "logs/1", "x"]));
    stdout(&strata(&db, &["put", "0x00ff", "0x0102"]));
    assert_eq!(stdout(&strata(&db, &["get", "users/alice"])), "1\n");
    assert_eq!(stdout(&strata(&db, &["get", "0x00ff"])), "0x0102\n");
    assert_eq!(
        stdout(&strata(&db, &["scan", "--prefix", "users/"])),
        "users/alice => 1\nusers/bob => 2\n"
    );
    assert_eq!(
        stdout(&strata(
            &db,
            &["scan", "--from", "logs", "--to", "users", "--limit", "5"]
        )),
        "logs/1 => x\n"
    );
    assert_eq!(
        stdout(&strata(&db, &["scan", "--limit", "1"]))
            .lines()
            .count(),
        1
    );
    stdout(&strata(&db, &["delete", "users/alice"]));
    stdout(&strata(&db, &["put", "logs/2", "y"]));
    stdout(&strata(
        &db,
        &["delete-range", "--from", "logs/", "--to", "logs0", "--sync"],
    ));
    assert_eq!(stdout(&strata(&db, &["scan", "--prefix", "logs/"])), "");
    let inverted = strata(&db, &["delete-range", "--from", "b", "--to", "a"]);
    assert!(!inverted.status.success());
    assert!(String::from_utf8_lossy(&inverted.stderr).contains("empty or inverted"));
    stdout(&strata(&db, &["flush"]));
    let compacted = stdout(&strata(&db, &["compact"]));
    assert!(
        compacted.starts_with('L'),
        "compact prints the levels: {compacted}"
    );
    let missing = strata(&db, &["get", "users/alice"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("not found"));
    let stats: serde_json::Value = serde_json::from_str(&stdout(&strata(&db, &["stats"]))).unwrap();
    // `compact` moved everything out of L0.
    let default_cf = &stats["properties"]["column_families"][0];
    assert_eq!(default_cf["levels"][0]["files"], 0);
    assert!(stats["properties"]["total_files"].as_u64().unwrap() >= 1);
    assert_eq!(default_cf["memtable_entries"], 0);
}

/// `get --range` prints one range of a value (raw, streamed; or as text), and refuses a bad one.
#[test]
fn get_prints_a_range_of_a_value() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    stdout(&strata(&db, &["put", "k", "0123456789"]));
    let raw = |range: &str| strata(&db, &["get", "k", "--raw", "--range", range]);
    assert_eq!(stdout(&raw("2-4")), "234");
    assert_eq!(stdout(&raw("7-")), "789");
    assert_eq!(stdout(&raw("-2")), "89");
    assert_eq!(stdout(&raw("5-500")), "56789");
    assert_eq!(
        stdout(&strata(&db, &["get", "k", "--range", "0-1"])),
        "01\n"
    );
    assert_eq!(stdout(&strata(&db, &["get", "k", "--raw"])), "0123456789");
    for (bad, says) in [
        ("10-", "past the end"),
        ("4-2", "past the last"),
        ("x", "expected"),
    ] {
        let o = raw(bad);
        assert!(!o.status.success(), "{bad}");
        assert!(stderr_of(&o).contains(says), "{bad}: {}", stderr_of(&o));
    }
}

#[test]
fn column_families_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    stdout(&strata(&db, &["cf", "create", "logs"]));
    assert_eq!(stdout(&strata(&db, &["cf", "list"])), "default\nlogs\n");
    stdout(&strata(&db, &["--cf", "logs", "put", "k", "in-logs"]));
    stdout(&strata(&db, &["put", "k", "in-default"]));
    assert_eq!(
        stdout(&strata(&db, &["--cf", "logs", "get", "k"])),
        "in-logs\n"
    );
    assert_eq!(stdout(&strata(&db, &["get", "k"])), "in-default\n");
    stdout(&strata(&db, &["--cf", "logs", "compact"]));
    assert_eq!(
        stdout(&strata(&db, &["--cf", "logs", "scan"])),
        "k => in-logs\n"
    );
    let dup = strata(&db, &["cf", "create", "logs"]);
    assert!(!dup.status.success());
    assert!(String::from_utf8_lossy(&dup.stderr).contains("already exists"));
    stdout(&strata(&db, &["cf", "drop", "logs"]));
    assert_eq!(stdout(&strata(&db, &["cf", "list"])), "default\n");
    let gone = strata(&db, &["--cf", "logs", "get", "k"]);
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("no column family named logs"));
    let default_drop = strata(&db, &["cf", "drop", "default"]);
    assert!(!default_drop.status.success());
}

#[test]
fn bad_input_is_reported_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let o = strata(&db, &["put", "0xabc", "v"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("even number of digits"));
    let o = strata(&db, &["bench", "--num", "10", "--compression_type", "lz9"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("compression_type"));
    std::fs::create_dir_all(dir.path().join("precious")).unwrap();
    std::fs::write(dir.path().join("precious/file"), "keep me").unwrap();
    let o = strata(&dir.path().join("precious"), &["bench", "--num", "10"]);
    assert!(!o.status.success());
    assert!(
        dir.path().join("precious/file").exists(),
        "bench never deletes a directory that is not a store"
    );
}

#[test]
fn bench_prints_db_bench_lines() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bench");
    let out = stdout(&strata(
        &db,
        &[
            "bench",
            "--num=2000",
            "--benchmarks",
            "fillseq,fillrandom,overwrite,readrandom,readmissing,readseq,seekrandom",
            "--sync=false",
            "--threads",
            "2",
            "--compression_type=zstd",
        ],
    ));
    for name in [
        "fillseq",
        "fillrandom",
        "overwrite",
        "readrandom",
        "readmissing",
        "readseq",
        "seekrandom",
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{name:<12} :")))
            .unwrap_or_else(|| panic!("{name} missing:\n{out}"));
        assert!(
            line.contains("micros/op") && line.contains("ops/sec"),
            "{line}"
        );
    }
    assert!(
        out.contains("(2000 of 2000 found)"),
        "readrandom finds every key:\n{out}"
    );
    assert!(
        out.contains("(0 of 2000 found)"),
        "readmissing finds none:\n{out}"
    );
    let out = stdout(&strata(
        &dir.path().join("bench-compaction"),
        &[
            "bench",
            "--num=3000",
            "--benchmarks=fillrandom,compact,readwhilewriting,stats",
            "--write_buffer_size=65536",
            "--level0_file_num_compaction_trigger=2",
        ],
    ));
    assert!(
        out.lines().any(|l| l.starts_with("compact      :")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("readwhilewriting :") || l.starts_with("readwhilewriting:")),
        "{out}"
    );
    assert!(out.contains("write amplification: "), "{out}");
    // Ranged reads of one large value, beside pread on a plain file of the same bytes.
    let out = stdout(&strata(
        &dir.path().join("bench-ranges"),
        &[
            "bench",
            "--benchmarks=readrange,dropcache,readrange",
            "--enable_blob_files",
            "--value_size=3000000",
            "--reads=500",
        ],
    ));
    // Each run: aligned then unaligned offsets, each a lookup per read, one reader, and pread.
    for (prefix, each_run) in [
        ("readrange    :", 2),
        ("  reader     :", 2),
        ("  pread      :", 2),
    ] {
        let lines = out.lines().filter(|l| l.starts_with(prefix)).count();
        assert_eq!(lines, 2 * each_run, "{prefix}\n{out}");
    }
    assert_eq!(out.matches("random unaligned offsets").count(), 6, "{out}");
    assert!(out.contains("x pread's time)"), "{out}");
    // --use_existing_db keeps the data.
    let out = stdout(&strata(
        &db,
        &[
            "bench",
            "--num=2000",
            "--benchmarks=readrandom",
            "--use_existing_db",
        ],
    ));
    assert!(out.contains("(2000 of 2000 found)"), "{out}");
}

#[test]
fn verify_reports_a_damaged_file_and_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for i in 0..20 {
        stdout(&strata(&db, &["put", &format!("k{i:02}"), "value"]));
    }
    stdout(&strata(&db, &["flush"]));
    let report = stdout(&strata(&db, &["verify"]));
    assert!(
        report
            .lines()
            .any(|l| l.contains(".sst\ttable") && l.ends_with("\tok")),
        "{report}"
    );

    let table = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .unwrap();
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[10] ^= 1;
    std::fs::write(&table, bytes).unwrap();
    let out = strata(&db, &["verify"]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let name = table.file_name().unwrap().to_string_lossy().into_owned();
    let line = text.lines().find(|l| l.starts_with(&name)).unwrap();
    assert!(line.contains("corruption"), "{line}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("1 of"),
        "{out:?}"
    );
}

#[test]
fn verify_warns_of_loose_modes_and_share_opens_the_store_to_its_group() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    stdout(&strata(&db, &["put", "k", "v"]));
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let set = |p: &std::path::Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
    };
    let quiet = strata(&db, &["verify"]);
    assert!(quiet.status.success());
    assert!(!stderr_of(&quiet).contains("warning"), "{quiet:?}");
    // Readable by every account: a warning naming the file and the fix, not damage.
    set(&db.join("CURRENT"), 0o644);
    let loose = strata(&db, &["verify"]);
    assert!(loose.status.success(), "{loose:?}");
    let err = stderr_of(&loose);
    assert!(
        err.contains("warning:") && err.contains("CURRENT") && err.contains("chmod o-rwx"),
        "{err}"
    );
    set(&db.join("CURRENT"), 0o600);

    let shared = strata(&db, &["share"]);
    assert!(shared.status.success(), "{shared:?}");
    stdout(&strata(&db, &["put", "k2", "v2"]));
    assert_eq!(mode(&db), 0o750);
    for entry in std::fs::read_dir(&db).unwrap() {
        let file = entry.unwrap().path();
        if file.is_file() {
            assert_eq!(mode(&file), 0o640, "{}", file.display());
        }
    }
    let quiet = strata(&db, &["verify"]);
    assert!(!stderr_of(&quiet).contains("warning"), "{quiet:?}");
    // A directory that holds no store (a mistyped `--db ~`) keeps its modes.
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("secret"), b"k").unwrap();
    set(&home.join("secret"), 0o600);
    let refused = strata(&home, &["share"]);
    assert!(!refused.status.success() && stderr_of(&refused).contains("no store"));
    assert_eq!(mode(&home.join("secret")), 0o600);
    assert!(!home.join("LOCK").exists());
}

#[test]
fn stress_verifies_every_read_and_rejects_bad_flags() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let args = [
        "stress",
        "--threads",
        "3",
        "--ops_per_thread",
        "3000",
        "--max_key",
        "2000",
        "--reopen",
        "2",
        "--enable_blob_files",
    ];
    let out = stdout(&strata(&db, &args));
    assert!(out.contains("stress: 9000 operations"), "{out}");
    assert!(out.contains("2 reopens"), "{out}");
    // One operation in 20 takes a snapshot (about 450 here), each read again before it goes.
    let snapshots = number_before(&out, " snapshots read again");
    assert!(snapshots > 200, "{out}");
    // A second run starts by verifying the first one's keys.
    let out = stdout(&strata(&db, &args));
    assert!(out.contains("verified 2000 keys"), "{out}");

    let bad = strata(&db, &["stress", "--readpercent", "90"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("add up to 150"));
    let other = dir.path().join("other");
    stdout(&strata(&other, &["put", "k", "v"]));
    let orphan = strata(&other, &["stress"]);
    assert!(String::from_utf8_lossy(&orphan.stderr).contains("is missing"));
}

/// The crash test: SIGKILL at random moments, every restart verifies the whole expected state.
/// `STRATA_CRASH_SECS` (default 60: about 30 kill cycles, and a minute of `make test`'s budget)
/// bounds it.
#[test]
fn crash_test_survives_repeated_sigkills() {
    let secs = std::env::var("STRATA_CRASH_SECS").unwrap_or_else(|_| "60".into());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = stdout(&strata(
        &db,
        &[
            "stress",
            "--crash_test",
            "--duration",
            &secs,
            "--kill_interval",
            "3",
            "--max_key",
            "5000",
            "--enable_blob_files",
            "--ttl",
            "86400",
        ],
    ));
    println!("{out}");
    let cycles = number_before(&out, " SIGKILL cycles");
    assert!(cycles >= 3, "{out}");
    assert!(out.contains("final verification passed"), "{out}");
}

/// The number printed just before the first `phrase` in `out`.
fn number_before(out: &str, phrase: &str) -> u64 {
    out.split(phrase)
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number before {phrase:?} in {out}"))
}

fn stderr_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Input that once panicked (exit 101) gets a clear error, or works.
#[test]
fn bad_input_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let o = strata(&db, &["put", "0xaé1", "v"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("not valid hex"), "{}", stderr_of(&o));

    // A value larger than the bench's value buffer (a division by zero once).
    let bench = dir.path().join("bench");
    let o = strata(
        &bench,
        &[
            "bench",
            "--num",
            "2",
            "--value_size",
            "1048600",
            "--benchmarks",
            "fillseq",
        ],
    );
    assert!(o.status.success(), "{}", stderr_of(&o));
    let o = strata(&bench, &["bench", "--num", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));

    // A TTL past the end of time never expires (it wrapped around to the past once).
    stdout(&strata(
        &db,
        &["put", "k", "v", "--ttl", "18446744073709551615"],
    ));
    assert_eq!(stdout(&strata(&db, &["get", "k"])), "v\n");
}

/// `scan | head -1`: the reader going away ends `strata` quietly, as it does `cat`.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    stdout(&strata(
        &db,
        &["bench", "--num", "20000", "--benchmarks", "fillseq"],
    ));
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--db")
        .arg(&db)
        .arg("scan")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = stderr_of(&out);
    assert!(!err.contains("panicked"), "{err}");
    assert_ne!(out.status.code(), Some(101), "{err}");
}

/// Commands that only read never create a store: a mistyped `--db` says there is none.
#[test]
fn reading_commands_never_create_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo").join("x");
    for args in [
        &["get", "a"][..],
        &["scan"],
        &["stats"],
        &["blob", "list"],
        &["cf", "list"],
        &["flush"],
        &["compact"],
        &["verify"],
        &["repair"],
    ] {
        let o = strata(&typo, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            stderr_of(&o).contains("no store at"),
            "{args:?}: {}",
            stderr_of(&o)
        );
        assert!(
            !dir.path().join("typo").exists(),
            "{args:?} created a directory"
        );
    }
    stdout(&strata(&typo, &["put", "a", "1"]));
    assert_eq!(stdout(&strata(&typo, &["get", "a"])), "1\n");
}

/// The first case: a MANIFEST cut by 10 bytes. The open fails naming it and deletes
/// nothing; `strata repair` brings every key back; `verify` passes.
#[test]
fn repair_is_the_way_out_of_a_damaged_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    stdout(&strata(
        &db,
        &["bench", "--num", "5000", "--benchmarks", "fillrandom"],
    ));
    let before = stdout(&strata(&db, &["scan"]));
    assert!(!before.is_empty());
    let manifest = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("MANIFEST-")
        })
        .unwrap();
    let len = std::fs::metadata(&manifest).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&manifest)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    let o = strata(&db, &["scan"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr_of(&o).contains("MANIFEST"), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("strata repair"), "{}", stderr_of(&o));
    let o = strata(&db, &["verify"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "verify must call the store damaged"
    );

    let report = stdout(&strata(&db, &["repair"]));
    assert!(report.contains("kept"), "{report}");
    assert_eq!(stdout(&strata(&db, &["scan"])), before);
    stdout(&strata(&db, &["verify"]));
}

/// A crash's half-written table is a note, and `verify` exits 0.
#[test]
fn verify_passes_over_crash_leftovers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    stdout(&strata(&db, &["put", "a", "1"]));
    stdout(&strata(&db, &["flush"]));
    std::fs::write(db.join("000777.sst"), b"").unwrap();
    let out = stdout(&strata(&db, &["verify"]));
    assert!(out.contains("000777.sst"), "{out}");
    assert!(out.contains("unreferenced leftover"), "{out}");
}

/// Reading commands open read-only: they work while another process writes the store, and a
/// writing command names the process holding it.
#[test]
fn reading_commands_work_beside_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    stdout(&strata(&path, &["put", "a", "1"]));
    let writer = strata_engine::Db::open(&path, strata_engine::Options::default()).unwrap();
    writer.put("b", "2").unwrap();
    assert_eq!(stdout(&strata(&path, &["get", "a"])), "1\n");
    assert_eq!(stdout(&strata(&path, &["scan"])), "a => 1\nb => 2\n");
    stdout(&strata(&path, &["stats"]));
    let o = strata(&path, &["put", "c", "3"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr_of(&o);
    assert!(
        err.contains(&format!("in use by process {}", std::process::id())),
        "{err}"
    );
    drop(writer);
    stdout(&strata(&path, &["put", "c", "3"]));
}

#[test]
fn the_data_commands_through_the_component_see_the_native_store_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let wasm = |args: &[&str]| {
        let mut all = vec!["--engine", "wasm"];
        all.extend_from_slice(args);
        strata(&db, &all)
    };
    assert!(
        strata(&db, &["put", "users/alice", "native"])
            .status
            .success()
    );
    assert!(
        wasm(&["put", "users/bob", "component", "--sync"])
            .status
            .success()
    );
    assert!(wasm(&["put", "0x00ff", "0x0102"]).status.success());
    assert_eq!(stdout(&wasm(&["get", "users/alice"])), "native\n");
    assert_eq!(stdout(&strata(&db, &["get", "users/bob"])), "component\n");
    assert_eq!(
        stdout(&wasm(&["scan", "--prefix", "users/"])),
        stdout(&strata(&db, &["scan", "--prefix", "users/"]))
    );
    assert_eq!(stdout(&strata(&db, &["get", "0x00ff"])), "0x0102\n");
    assert!(
        wasm(&["delete-range", "--from", "users/a", "--to", "users/b"])
            .status
            .success()
    );
    assert!(wasm(&["flush"]).status.success());
    assert!(!strata(&db, &["get", "users/alice"]).status.success());
    let missing = wasm(&["get", "users/alice"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("not found"));
    let other_cf = strata(&db, &["--engine", "wasm", "--cf", "x", "get", "k"]);
    assert!(String::from_utf8_lossy(&other_cf.stderr).contains("default column family"));
    assert!(strata(&db, &["verify"]).status.success());
}
