//! Runs a `wasm32-wasip2` command component (a test binary, say) under the same wasmtime the
//! host uses, with a fresh temporary directory preopened as `/tmp` (and `TMPDIR` pointing there)
//! and nothing else of the filesystem. Cargo uses it as the runner for the engine's tests on
//! wasm32-wasip2 (`make test`):
//!
//! `CARGO_TARGET_WASM32_WASIP2_RUNNER=strata-wasi-run cargo test --target wasm32-wasip2 ...`

use std::process::ExitCode;

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::p2::bindings::sync::Command;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

struct State {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

fn run() -> Result<u8, String> {
    let mut args = std::env::args().skip(1);
    let wasm = args
        .next()
        .ok_or("usage: strata-wasi-run COMPONENT.wasm [ARGS...]")?;
    let guest_args: Vec<String> = std::iter::once(wasm.clone()).chain(args).collect();
    let engine = Engine::default();
    let component =
        Component::from_file(&engine, &wasm).map_err(|e| format!("loading {wasm}: {e:#}"))?;
    let mut linker = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| e.to_string())?;
    let tmp = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let mut builder = WasiCtxBuilder::new();
    builder
        .inherit_stdio()
        .args(&guest_args)
        .env("TMPDIR", "/tmp")
        .allow_blocking_current_thread(true)
        .preopened_dir(tmp.path(), "/tmp", FsPerms::ReadWrite)
        .map_err(|e| format!("preopening {}: {e:#}", tmp.path().display()))?;
    // The test knobs (seeds, sizes) pass through; nothing else of the environment does.
    for (k, v) in std::env::vars() {
        if k.starts_with("STRATA_") || k == "RUST_BACKTRACE" {
            builder.env(&k, &v);
        }
    }
    let mut store = Store::new(
        &engine,
        State {
            wasi: builder.build(),
            table: ResourceTable::new(),
        },
    );
    let command = Command::instantiate(&mut store, &component, &linker)
        .map_err(|e| format!("instantiating {wasm}: {e:#}"))?;
    match command.wasi_cli_run().call_run(&mut store) {
        Ok(Ok(())) => Ok(0),
        Ok(Err(())) => Ok(1),
        Err(e) => match e.downcast_ref::<I32Exit>() {
            Some(I32Exit(code)) => Ok(u8::try_from(*code).unwrap_or(1)),
            None => Err(format!("{wasm} trapped: {e:#}")),
        },
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("strata-wasi-run: {e}");
            ExitCode::FAILURE
        }
    }
}
