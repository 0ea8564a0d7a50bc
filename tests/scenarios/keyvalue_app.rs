//! Composition: `kv-app`, a component that imports `wasi:keyvalue` and knows nothing of Strata
//! (`crates/wasi-guest/examples/kv-app.rs`), is plugged into the Strata component with `wac plug`
//! and run by plain `wasmtime run` with one preopened directory. What it writes, the native
//! `strata` reads, and the other way round; buckets are column families; errors are messages.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use strata_e2e::{build_dir, stdout, strata, tool};

/// The composition, made once per run: `kv-app` is built beside the guest component the host
/// crate built (TARGET/wasi-guest, as `crates/wasi-host/build.rs` does, so the engine is not
/// built again) and the two are plugged together there.
fn composed(wac: &Path) -> &'static Path {
    static COMPOSED: OnceLock<PathBuf> = OnceLock::new();
    COMPOSED.get_or_init(|| compose(wac))
}

fn compose(wac: &Path) -> PathBuf {
    let target = build_dir().parent().unwrap().join("wasi-guest");
    let guest_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/wasi-guest");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = Command::new(cargo)
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .args(["--lib", "--example", "kv-app"])
        .current_dir(&guest_dir)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .unwrap();
    assert!(built.success(), "building kv-app failed");
    let release = target.join("wasm32-wasip2/release");
    let out = release.join("kv-app-plugged-into-strata.wasm");
    let plugged = Command::new(wac)
        .arg("plug")
        .arg(release.join("examples/kv-app.wasm"))
        .arg("--plug")
        .arg(release.join("strata_wasi_guest.wasm"))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    stdout(&plugged);
    out
}

struct App {
    wasmtime: PathBuf,
    wasm: PathBuf,
    db: PathBuf,
}

impl App {
    /// `wasmtime run --dir DB::/store kv-app.wasm ARGS...`: the store's directory is all the
    /// composition sees.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(&self.wasmtime)
            .arg("run")
            .arg("--dir")
            .arg(format!("{}::/store", self.db.display()))
            .arg(&self.wasm)
            .args(args)
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        stdout(&self.run(args))
    }

    fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        String::from_utf8(out.stderr).unwrap()
    }
}

#[test]
fn a_wasi_keyvalue_app_plugged_into_strata_runs_under_plain_wasmtime() {
    let (Some(wac), Some(wasmtime)) = (tool("wac"), tool("wasmtime")) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let app = App {
        wasmtime,
        wasm: composed(&wac).to_path_buf(),
        db: tmp.path().join("db"),
    };
    // wasmtime preopens a directory that exists; the store in it is the app's to create.
    std::fs::create_dir(&app.db).unwrap();

    // The app opens (creates) the store; a counter is atomic and survives each run.
    assert_eq!(app.ok(&["incr", "visits"]), "1\n");
    assert_eq!(app.ok(&["incr", "visits", "41"]), "42\n");
    app.ok(&["set-many", "users/alice=31", "users/bob=27"]);
    app.ok(&["set", "notes/today", "tea"]);
    app.ok(&["delete", "notes/today"]);
    assert_eq!(app.ok(&["exists", "notes/today"]), "false\n");

    // The native engine sees what the component wrote, byte for byte...
    assert_eq!(stdout(&strata(&app.db, &["get", "visits"])), "42\n");
    assert_eq!(stdout(&strata(&app.db, &["get", "users/bob"])), "27\n");
    // ...and the component what the native engine wrote.
    stdout(&strata(&app.db, &["put", "users/carol", "45"]));
    assert_eq!(
        app.ok(&["get-many", "users/alice", "users/carol", "users/nobody"]),
        "users/alice=31\nusers/carol=45\n"
    );
    assert_eq!(
        app.ok(&["list"]),
        "users/alice\nusers/bob\nusers/carol\nvisits\n"
    );

    // A bucket is a column family, made by any face.
    stdout(&strata(&app.db, &["cf", "create", "sessions"]));
    app.ok(&["--bucket", "sessions", "set", "s1", "open"]);
    assert_eq!(
        stdout(&strata(&app.db, &["--cf", "sessions", "get", "s1"])),
        "open\n"
    );
    assert_eq!(app.ok(&["--bucket", "sessions", "list"]), "s1\n");

    // Errors come back as the interface's variants, reported by the app.
    assert!(
        app.fails(&["--bucket", "nope", "list"])
            .contains("no such bucket")
    );
    assert!(app.fails(&["get", "users/nobody"]).contains("no value"));
    app.ok(&["set", "word", "ten"]);
    assert!(
        app.fails(&["incr", "word"])
            .contains("is not a decimal u64 counter")
    );

    // A traversal key is only a key: nothing is written outside the store's directory.
    app.ok(&["set", "../../escaped", "no"]);
    assert_eq!(app.ok(&["get", "../../escaped"]), "no\n");
    assert!(!tmp.path().join("escaped").exists());

    stdout(&strata(&app.db, &["verify"]));
}

#[test]
fn without_a_preopened_directory_the_composition_reports_an_error() {
    let (Some(wac), Some(wasmtime)) = (tool("wac"), tool("wasmtime")) else {
        return;
    };
    let out = Command::new(wasmtime)
        .arg("run")
        .arg(composed(&wac))
        .args(["get", "k"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    // The store's directory is not there: the engine's I/O error names it.
    assert!(stderr.starts_with("kv-app: I/O error"), "{stderr}");
    assert!(stderr.contains("/store"), "{stderr}");
}
