//! `strata serve` killed with SIGKILL in the middle of writes through the mount and the REST API:
//! after a restart the store verifies, and every write that was acknowledged is there (a file
//! whose `fsync` returned, a 204 to a synced PUT), with its bytes.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use strata_e2e::{Serve, fuse_usable, stdout, strata};

fn file_bytes(i: u32) -> Vec<u8> {
    format!("file {i} written through the mount\n")
        .repeat(1 + (i as usize % 50))
        .into_bytes()
}

fn rest_bytes(writer: u32, i: u32) -> Vec<u8> {
    format!("REST put {i} from writer {writer}").into_bytes()
}

#[test]
fn a_killed_serve_keeps_every_acknowledged_write() {
    let mount = fuse_usable();
    let tmp = tempfile::tempdir().unwrap();
    let (db, mnt) = (tmp.path().join("db"), tmp.path().join("mnt"));
    let serve = Serve::start(&db, mount.then_some(mnt.as_path()), &[]);
    if mount {
        std::fs::create_dir(mnt.join("crash")).unwrap();
    }
    let files_acked = Mutex::new(Vec::new());
    let puts_acked = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        if mount {
            s.spawn(|| {
                for i in 0u32.. {
                    let path = mnt.join(format!("crash/f{i:06}"));
                    let written = std::fs::File::create(&path).and_then(|mut f| {
                        f.write_all(&file_bytes(i))?;
                        f.sync_all()
                    });
                    match written {
                        Ok(()) => files_acked.lock().unwrap().push(i),
                        Err(_) => break, // the mount died with serve
                    }
                }
            });
        }
        for w in 0..2u32 {
            let (serve, puts_acked) = (&serve, &puts_acked);
            s.spawn(move || {
                for i in 0u32.. {
                    let key = format!("rest/{w}/{i:06}");
                    let body = format!(r#"{{"value":"{}"}}"#, strata_e2e::b64(&rest_bytes(w, i)));
                    let path =
                        format!("/api/v1/kv/{}?sync=1", strata_e2e::path_key(key.as_bytes()));
                    match serve.try_call("PUT", &path, body.as_bytes()) {
                        Ok(r) if r.status == 204 => puts_acked.lock().unwrap().push((w, i)),
                        Ok(r) => panic!("PUT {key}: {} {}", r.status, r.text()),
                        Err(_) => break, // serve is gone
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_millis(1500));
        serve.kill();
    });
    let files = files_acked.into_inner().unwrap();
    let puts = puts_acked.into_inner().unwrap();
    assert!(
        !puts.is_empty(),
        "no REST write was acknowledged before the kill"
    );
    assert!(
        !mount || !files.is_empty(),
        "no file was fsynced before the kill"
    );

    // Restart: the store verifies, and serves every acknowledged write.
    let verified = strata(&db, &["verify"]);
    assert!(verified.status.success(), "{}", stdout(&verified));
    let serve = Serve::start(&db, mount.then_some(mnt.as_path()), &[]);
    for &(w, i) in &puts {
        let key = format!("rest/{w}/{i:06}");
        assert_eq!(
            serve.value(key.as_bytes()),
            Some(rest_bytes(w, i)),
            "acknowledged {key}"
        );
    }
    for &i in &files {
        let key = format!("crash/f{i:06}");
        assert_eq!(
            serve.value(key.as_bytes()),
            Some(file_bytes(i)),
            "fsynced {key}"
        );
        assert_eq!(std::fs::read(mnt.join(&key)).unwrap(), file_bytes(i));
    }
    eprintln!(
        "after SIGKILL: {} fsynced files and {} synced REST puts, all there",
        files.len(),
        puts.len()
    );
    serve.stop();
}
