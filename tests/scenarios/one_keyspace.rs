//! One keyspace through every face, as a user would drive them: files copied into
//! `strata serve --mount` read back over REST byte for byte; a REST put is a file at once; a REST
//! deleteRange removes a directory from the mount; after a clean stop the WASM component scans
//! what the native engine scans, and a batch it writes is there when `serve` starts again.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use strata_e2e::{Serve, b64, fuse_usable, stdout, strata};
use strata_wasi_host::{Limits, WasiDb, WriteBatch, default_options};

fn pseudo_random(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn the_mount_the_api_and_the_component_share_one_keyspace() {
    if !fuse_usable() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (db, mnt, src) = (
        tmp.path().join("db"),
        tmp.path().join("mnt"),
        tmp.path().join("src"),
    );
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("photos/cat.jpg", pseudo_random(300_000, 1)),
        ("photos/2026/dog.png", pseudo_random(1_500_000, 2)),
        ("photos/empty.txt", Vec::new()),
        ("notes/todo.md", b"- ship it\n".to_vec()),
    ];
    for (name, bytes) in &files {
        let path = src.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let serve = Serve::start(&db, Some(&mnt), &[]);

    // cp -r into the mount; every file is a key whose value is its bytes.
    let cp = Command::new("cp")
        .arg("-r")
        .arg(src.join("photos"))
        .arg(src.join("notes"))
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(cp.success());
    for (name, bytes) in &files {
        assert_eq!(
            serve.value(name.as_bytes()).as_deref(),
            Some(&bytes[..]),
            "{name} over REST"
        );
    }

    // A REST put is a file in the mount at once.
    assert_eq!(
        serve
            .put(b"notes/from-rest.txt", b"written over REST")
            .status,
        204
    );
    assert_eq!(
        std::fs::read(mnt.join("notes/from-rest.txt")).unwrap(),
        b"written over REST"
    );
    assert_eq!(
        names(&mnt.join("notes")),
        BTreeSet::from(["from-rest.txt".into(), "todo.md".into()])
    );

    // deleteRange over a prefix removes the directory from the mount.
    let range = format!(
        r#"{{"start":"{}","end":"{}"}}"#,
        b64(b"photos/"),
        b64(b"photos0")
    );
    let r = serve.call("POST", "/api/v1/kv:deleteRange", range.as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!mnt.join("photos").exists(), "photos/ is still mounted");
    assert_eq!(names(&mnt), BTreeSet::from(["notes".into()]));
    assert_eq!(serve.value(b"photos/cat.jpg"), None);
    // The mounted column family and its metadata column family cannot be dropped under it.
    for cf in ["default", "default.fsmeta"] {
        let r = serve.call("DELETE", &format!("/api/v1/cfs/{cf}"), b"");
        assert_eq!(r.status, 409, "{cf}: {}", r.text());
    }
    assert!(mnt.join("notes").exists());
    serve.stop();

    // After a clean stop, the component scans exactly what the native engine scans.
    let native = stdout(&strata(&db, &["scan", "--prefix", "notes/"]));
    let wasm = stdout(&strata(
        &db,
        &["--engine", "wasm", "scan", "--prefix", "notes/"],
    ));
    assert_eq!(wasm, native);
    assert!(native.contains("notes/from-rest.txt"), "{native}");

    // A batch the component writes is there when serve starts again, in both faces.
    let component = WasiDb::open(&db, Limits::default(), default_options()).unwrap();
    let mut batch = WriteBatch::new();
    batch.put("notes/from-wasm.txt", "written in the sandbox");
    batch.delete("notes/todo.md");
    component.write(&batch, true).unwrap();
    component.close().unwrap();
    drop(component);

    let serve = Serve::start(&db, Some(&mnt), &[]);
    assert_eq!(
        serve.value(b"notes/from-wasm.txt").as_deref(),
        Some(&b"written in the sandbox"[..])
    );
    assert_eq!(
        std::fs::read(mnt.join("notes/from-wasm.txt")).unwrap(),
        b"written in the sandbox"
    );
    assert_eq!(
        names(&mnt.join("notes")),
        BTreeSet::from(["from-rest.txt".into(), "from-wasm.txt".into()]),
        "a key the component deleted is gone from the mount"
    );
    serve.stop();
    let verified = strata(&db, &["verify"]);
    assert!(verified.status.success(), "{}", stdout(&verified));
}
