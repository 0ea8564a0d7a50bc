//! Temporary directories for the unit tests, on every target: WASI has no system temp
//! directory, so there the tests use `$TMPDIR` (the runner preopens one; see
//! `crates/wasi-host/src/bin/strata-wasi-run.rs`).

#![allow(clippy::unwrap_used)]

pub(crate) fn tempdir() -> tempfile::TempDir {
    #[cfg(target_os = "wasi")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let dir = std::env::var_os("TMPDIR").unwrap_or_else(|| "/tmp".into());
            let _ = tempfile::env::override_temp_dir(std::path::Path::new(&dir));
        });
    }
    tempfile::tempdir().unwrap()
}
