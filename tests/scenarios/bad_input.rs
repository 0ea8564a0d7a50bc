//! Bad input at every door at once, against one running store: each door answers with its own
//! clear error (a problem document over HTTP, an errno in the mount, the error variant from the
//! component, a usage error from the CLI) or, for a key that is only odd, keeps it as a key that
//! no path can reach outside the store; and the store still verifies.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use strata_e2e::{Serve, b64, fuse_usable, path_key, stdout, strata};
use strata_wasi_host::{Limits, WasiDb, default_options};

const NINE_MIB: usize = 9 << 20;

fn assert_problem(r: &strata_e2e::Reply, status: u16, detail_has: &str) {
    assert_eq!(r.status, status, "{}", r.text());
    assert_eq!(r.content_type, "application/problem+json");
    let detail = r.json()["detail"].as_str().unwrap_or_default().to_string();
    assert!(
        detail.contains(detail_has),
        "detail {detail:?} should say {detail_has:?}"
    );
}

#[test]
fn every_door_refuses_bad_input_clearly_and_the_store_still_verifies() {
    let mount = fuse_usable();
    let tmp = tempfile::tempdir().unwrap();
    let (db, mnt) = (tmp.path().join("db"), tmp.path().join("mnt"));
    let serve = Serve::start(&db, mount.then_some(mnt.as_path()), &[]);
    assert_eq!(serve.put(b"docs/readme.txt", b"fine").status, 204);

    // HTTP: a 9 MiB key (in a batch, so the body is within limits and the engine judges it).
    let huge_key = vec![b'k'; NINE_MIB];
    let batch = format!(
        r#"{{"ops":[{{"op":"put","key":"{}","value":"{}"}}]}}"#,
        b64(&huge_key),
        b64(b"v")
    );
    let r = serve.call("POST", "/api/v1/kv:batchWrite", batch.as_bytes());
    assert_problem(&r, 400, "exceeds the limit");
    // HTTP: a body past the 64 MiB limit.
    let body = vec![b' '; (64 << 20) + 1];
    let r = serve.call("PUT", &format!("/api/v1/kv/{}", path_key(b"big")), &body);
    assert_problem(&r, 413, "");
    // HTTP: malformed JSON and a key that is not base64url.
    let r = serve.call("POST", "/api/v1/kv:batchGet", b"{\"keys\": [");
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.content_type, "application/problem+json");
    let r = serve.call("GET", "/api/v1/kv/not*base64", b"");
    assert_eq!(r.status, 400, "{}", r.text());

    // Odd keys are keys: a NUL inside, a traversal. They are stored as bytes and the mount hides
    // them (doc/fuse.md); no file outside the store is touched.
    for key in [&b"docs/a\0b"[..], b"../../etc/passwd", b"docs/../../escape"] {
        assert_eq!(serve.put(key, b"only a key").status, 204);
        assert_eq!(serve.value(key).as_deref(), Some(&b"only a key"[..]));
    }
    assert!(!tmp.path().join("escape").exists());
    if mount {
        let shown: BTreeSet<String> = std::fs::read_dir(&mnt)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(shown, BTreeSet::from(["docs".to_string()]));
        let docs: Vec<_> = std::fs::read_dir(mnt.join("docs"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(docs, vec![std::ffi::OsString::from("readme.txt")]);

        // The mount: a name past 255 bytes, a hard link.
        let long = mnt.join("docs").join("n".repeat(256));
        let e = std::fs::write(&long, b"x").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENAMETOOLONG), "{e}");
        let e = std::fs::hard_link(mnt.join("docs/readme.txt"), mnt.join("docs/link")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
    }
    serve.stop();

    // The CLI: a bad flag value and a missing argument are usage errors (exit 2) that say why.
    let o = strata(&db, &["bench", "--num", "many"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--num"),
        "{o:?}"
    );
    let o = strata(&db, &["get"]);
    assert_eq!(o.status.code(), Some(2));

    // The component: the same 9 MiB key is the invalid-argument variant.
    let component = WasiDb::open(&db, Limits::default(), default_options()).unwrap();
    let e = component.put(&huge_key, "v").unwrap_err();
    assert!(
        matches!(e, strata_wasi_host::Error::InvalidArgument(ref m) if m.contains("exceeds the limit")),
        "{e}"
    );
    assert_eq!(
        component.get(b"../../etc/passwd").unwrap().as_deref(),
        Some(&b"only a key"[..])
    );
    component.close().unwrap();
    drop(component);

    let verified = strata(&db, &["verify"]);
    assert!(verified.status.success(), "{}", stdout(&verified));
    assert_eq!(stdout(&strata(&db, &["get", "docs/readme.txt"])), "fine\n");
}

/// Runs `sh -c script` with `args` as `$1`... in a user and mount namespace of its own, so
/// what it mounts is seen by nothing outside it. `None` (after saying why) where there are
/// no such namespaces, which under `CI` fails the test; the script exits 99 when its mount
/// fails.
fn in_mount_namespace(script: &str, args: &[&std::path::Path]) -> Option<std::process::Output> {
    let out = std::process::Command::new("unshare")
        .args([
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .args(args)
        .output();
    let missing = match out {
        Ok(out) => {
            let said = String::from_utf8_lossy(&out.stderr).into_owned();
            if out.status.code() != Some(99) && !said.contains("unshare:") {
                return Some(out);
            }
            said
        }
        Err(e) => format!("unshare: {e}"),
    };
    assert!(std::env::var_os("CI").is_none(), "CI is set but {missing}");
    eprintln!("this scenario needs a mount namespace: {missing}");
    None
}

/// A backup into the store's own directory is lost with the store; one reached through a bind
/// mount (another name for it, which no resolving of links undoes) is the same mistake and is
/// refused too, before anything is made: a bind of the store itself, and a bind of a directory
/// inside it (a container's two volumes, one within the other on the host).
#[test]
fn a_backup_into_a_bind_mount_of_its_store_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (db, view) = (tmp.path().join("db"), tmp.path().join("view"));
    stdout(&strata(&db, &["put", "k", "v"]));
    std::fs::create_dir(&view).unwrap();
    std::fs::create_dir(db.join("inner")).unwrap();
    let bin = strata_e2e::strata_bin();
    for (bound, dest) in [
        (db.clone(), view.join("backups")),
        (db.join("inner"), view.clone()),
    ] {
        let script = "mount --bind \"$1\" \"$2\" || exit 99; \
                      exec \"$3\" --db \"$4\" backup create --to \"$5\"";
        let Some(out) = in_mount_namespace(script, &[&bound, &view, &bin, &db, &dest]) else {
            return;
        };
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && said.contains("inside the store"),
            "{} bound at {}: {said}",
            bound.display(),
            view.display()
        );
    }
    assert!(
        !db.join("backups").exists(),
        "the refused destination was made"
    );
    assert_eq!(std::fs::read_dir(db.join("inner")).unwrap().count(), 0);
}

/// A restore builds the store beside its place and renames it in whole; into an empty volume
/// (a mount point, which no rename can replace) it builds in place, and the store opens there.
#[test]
fn a_backup_restores_into_an_empty_mounted_volume() {
    let tmp = tempfile::tempdir().unwrap();
    let (db, dest, volume) = (
        tmp.path().join("db"),
        tmp.path().join("backups"),
        tmp.path().join("volume"),
    );
    stdout(&strata(&db, &["put", "k", "restored"]));
    let to = dest.to_str().unwrap();
    stdout(&strata(&db, &["backup", "create", "--to", to]));
    std::fs::create_dir(&volume).unwrap();
    let bin = strata_e2e::strata_bin();
    let script = "mount -t tmpfs tmpfs \"$1\" || exit 99; \
                  \"$2\" backup restore --to \"$3\" \"$1\" && exec \"$2\" --db \"$1\" get k";
    let Some(out) = in_mount_namespace(script, &[&volume, &bin, &dest]) else {
        return;
    };
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(printed.lines().last(), Some("restored"), "{printed} {said}");
}
