//! Builds the guest component (`crates/wasi-guest`) for wasm32-wasip2 with a plain
//! `cargo build --release`, in a target directory of its own (the outer build holds the lock on
//! its own), and hands its path to the crate as `STRATA_GUEST_WASM`: one build serves every test
//! and the CLI.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let guest = manifest.join("../wasi-guest");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    // OUT_DIR is TARGET/debug/build/strata-wasi-host-HASH/out: keep the guest's build beside the
    // outer target directory so it survives rebuilds of this crate.
    let target = out
        .ancestors()
        .nth(4)
        .map_or_else(|| out.join("guest"), |t| t.join("wasi-guest"));
    for path in [
        "../wasi-guest/src",
        "../wasi-guest/Cargo.toml",
        "../wasi-guest/.cargo/config.toml",
        "../../wit",
        "../engine/src",
    ] {
        println!("cargo:rerun-if-changed={path}");
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--manifest-path",
        ])
        .arg(guest.join("Cargo.toml"))
        // The guest's own `.cargo/config.toml` (its target features) applies from its folder.
        .current_dir(&guest)
        .env("CARGO_TARGET_DIR", &target)
        // The outer build's flags are for the host, not the guest.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!(
            "building the guest component failed ({s}); is the wasm32-wasip2 target installed (make deps)?"
        ),
        Err(e) => panic!("cannot run cargo to build the guest component: {e}"),
    }
    let wasm = target.join("wasm32-wasip2/release/strata_wasi_guest.wasm");
    println!("cargo:rustc-env=STRATA_GUEST_WASM={}", wasm.display());
}
