//! Running the `strata` binary from the CLI's tests.

#![allow(clippy::unwrap_used, dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs `strata --db DB ARGS...`.
pub fn strata(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

/// Its stdout, after checking it succeeded.
pub fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}
