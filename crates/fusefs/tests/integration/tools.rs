//! Ordinary tools inside the mount (coreutils, git, tar, make and the like), each checked against
//! the same steps on a plain directory, and fsx hunting for corruption.

use std::path::Path;

use strata_fusefs::FsConfig;

use crate::common::{Mount, run_fsx, snapshot, starting_processes};

fn run(cmd: &str, args: &[&str], dir: &Path) -> String {
    let _starting = starting_processes();
    let out = std::process::Command::new(cmd)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn real_tools_work_inside_the_mount() {
    let Some(m) = Mount::new() else { return };
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let plain = tempfile::tempdir().unwrap();
    for root in [plain.path(), m.path()] {
        run("cp", &["-r", src.to_str().unwrap(), "tree"], root);
        run("tar", &["cf", "tree.tar", "tree"], root);
        run("mkdir", &["untarred"], root);
        run("tar", &["xf", "../tree.tar"], &root.join("untarred"));
    }
    assert_eq!(snapshot(plain.path()).len(), snapshot(m.path()).len());
    for root in [plain.path(), m.path()] {
        run("diff", &["-r", "tree", "untarred/tree"], root);
        run("diff", &["-r", src.to_str().unwrap(), "tree"], root);
    }
    let find = |root: &Path| {
        let mut v: Vec<String> = run("find", &[".", "-name", "*.rs"], root)
            .lines()
            .map(str::to_string)
            .collect();
        v.sort();
        v
    };
    assert_eq!(find(plain.path()), find(m.path()));
    // A git repository inside the mount: objects, index, refs, renames and fsyncs.
    let repo = m.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    run("git", &["init", "-q"], &repo);
    run("cp", &["-r", src.to_str().unwrap(), "src"], &repo);
    run("git", &["add", "."], &repo);
    let who = ["-c", "user.name=t", "-c", "user.email=t@t"];
    run(
        "git",
        &[&who[..], &["commit", "-qm", "first"]].concat(),
        &repo,
    );
    run("git", &["mv", "src/lib.rs", "src/lib2.rs"], &repo);
    run(
        "git",
        &[&who[..], &["commit", "-qm", "second"]].concat(),
        &repo,
    );
    run("git", &["fsck", "--strict"], &repo);
    assert_eq!(
        run("git", &["log", "--format=%s"], &repo),
        "second\nfirst\n"
    );
    assert!(run("git", &["status", "--porcelain"], &repo).is_empty());
}

#[test]
fn fsx_finds_no_corruption() {
    let Some(m) = Mount::new() else { return };
    run_fsx(&m);
}

#[test]
fn fsx_finds_no_corruption_with_a_small_write_back() {
    // fsx's file grows to 256 KiB: past 64 KiB every writer works in a value file.
    let config = FsConfig {
        write_back: 64 << 10,
        ..FsConfig::default()
    };
    let Some(m) = Mount::with(config, false) else {
        return;
    };
    run_fsx(&m);
}
