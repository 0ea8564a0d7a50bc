//! The sandbox: one wasmtime `Engine` per configuration for the process (with a thread that
//! advances its epoch), the component compiled once and cached on disk, and a `Store` per open
//! database whose WASI context preopens the store's directory and nothing else.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use wasmtime::component::{Component, Linker, ResourceAny, ResourceTable};
use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::bindings;
use crate::compiled_cache;
use crate::error::{Error, Result};
use crate::wit;

/// Where the store's directory appears inside the guest.
pub(crate) const GUEST_DIR: &str = "/store";

/// How often the epoch advances: the granularity of call deadlines.
const TICK: Duration = Duration::from_millis(10);

/// What the sandbox allows one instance.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Linear memory the guest may grow to (wasm32 cannot pass 4 GiB).
    pub memory_bytes: u64,
    /// How long one call may run before the guest is stopped.
    pub call_deadline: Duration,
    /// Fuel (roughly, wasm instructions) one call may burn; `None`: unmetered, which is faster.
    pub fuel_per_call: Option<u64>,
    /// Where compiled components are kept between runs (other builds' files there go once
    /// unused for 30 days); `None`: compile at every start.
    pub cache_dir: Option<PathBuf>,
    /// How often an idle store runs its background work (flushes, compactions); `None`: only
    /// after writes and when asked.
    pub maintenance_interval: Option<Duration>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 1 << 30,
            call_deadline: Duration::from_secs(60),
            fuel_per_call: None,
            cache_dir: default_cache_dir(),
            maintenance_interval: Some(Duration::from_millis(200)),
        }
    }
}

/// `$XDG_CACHE_HOME/strata/wasm`, or `~/.cache/strata/wasm`.
fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|c| c.join("strata").join("wasm"))
}

/// How a start went: worth reporting, since compiling the component is most of a cold start.
#[derive(Debug, Clone)]
pub struct StartReport {
    /// Creating the engine, loading or compiling the component, instantiating it.
    pub elapsed: Duration,
    /// The component was compiled in this process (not found in memory or on disk).
    pub compiled: bool,
    /// The compiled component came from the on-disk cache.
    pub from_disk_cache: bool,
}

/// The guest component as built by `crates/wasi-guest` (see build.rs).
pub fn guest_component() -> &'static [u8] {
    include_bytes!(env!("STRATA_GUEST_WASM"))
}

pub(crate) struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    memory: MemoryCap,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Refuses growth past the cap and remembers it did, so the trap that follows is reported as
/// what it is.
struct MemoryCap {
    max: u64,
    hit: bool,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired as u64 > self.max {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// One engine (and its compiled component) per fuel setting, for the life of the process.
struct Prepared {
    engine: Engine,
    component: Component,
    linker: Linker<HostState>,
}

fn prepared(fuel: bool, cache_dir: Option<&Path>) -> Result<(&'static Prepared, bool, bool)> {
    static READY: OnceLock<Mutex<HashMap<bool, &'static Prepared>>> = OnceLock::new();
    let mut ready = READY.get_or_init(Default::default).lock();
    if let Some(p) = ready.get(&fuel) {
        return Ok((p, false, false));
    }
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.consume_fuel(fuel);
    if std::env::var_os("STRATA_WASM_PERF_MAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    let engine = Engine::new(&config).map_err(host("wasmtime engine"))?;
    let (component, compiled, from_disk) = compiled_cache::load(&engine, cache_dir)?;
    let mut linker = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(host("linking WASI"))?;
    let ticker = engine.weak();
    std::thread::Builder::new()
        .name("strata-wasm-epoch".into())
        .spawn(move || {
            while let Some(e) = ticker.upgrade() {
                e.increment_epoch();
                drop(e);
                std::thread::sleep(TICK);
            }
        })
        .map_err(|e| Error::Host(format!("starting the epoch thread: {e}")))?;
    // Lives as long as the process: every WasiDb of this setting shares it.
    let p: &'static Prepared = Box::leak(Box::new(Prepared {
        engine,
        component,
        linker,
    }));
    ready.insert(fuel, p);
    Ok((p, compiled, from_disk))
}

pub(crate) fn host(what: &'static str) -> impl Fn(wasmtime::Error) -> Error {
    move |e| Error::Host(format!("{what}: {e:#}"))
}

/// A running instance of the component with its store.
pub(crate) struct Instance {
    store: Store<HostState>,
    bindings: bindings::Engine,
    limits: Limits,
}

impl Instance {
    pub(crate) fn start(dir: &Path, limits: &Limits) -> Result<(Instance, StartReport)> {
        let began = Instant::now();
        let (p, compiled, from_disk_cache) =
            prepared(limits.fuel_per_call.is_some(), limits.cache_dir.as_deref())?;
        let mut store = sandbox(&p.engine, dir, limits)?;
        let bindings = bindings::Engine::instantiate(&mut store, &p.component, &p.linker)
            .map_err(host("instantiating the component"))?;
        Ok((
            Instance {
                store,
                bindings,
                limits: limits.clone(),
            },
            StartReport {
                elapsed: began.elapsed(),
                compiled,
                from_disk_cache,
            },
        ))
    }

    /// One call into the guest, with a fresh deadline (and fuel); the guest's error and the
    /// sandbox's both come back as [`Error`].
    pub(crate) fn call<T>(
        &mut self,
        f: impl FnOnce(
            &mut Store<HostState>,
            &wit::Guest,
        ) -> wasmtime::Result<std::result::Result<T, wit::Error>>,
    ) -> Result<T> {
        self.call_export(|store, b| f(store, b.strata_kv_store()), from_guest)
    }

    /// [`Instance::call`] into any of the component's exports, with that export's error mapping.
    pub(crate) fn call_export<T, E>(
        &mut self,
        f: impl FnOnce(
            &mut Store<HostState>,
            &bindings::Engine,
        ) -> wasmtime::Result<std::result::Result<T, E>>,
        guest_error: impl FnOnce(E) -> Error,
    ) -> Result<T> {
        arm(&mut self.store, &self.limits)?;
        match f(&mut self.store, &self.bindings) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(guest_error(e)),
            Err(e) => Err(self.stopped(e)),
        }
    }

    pub(crate) fn drop_resource(&mut self, r: ResourceAny) -> Result<()> {
        arm(&mut self.store, &self.limits)?;
        r.resource_drop(&mut self.store)
            .map_err(|e| self.stopped(e))
    }

    /// What stopped the guest, named.
    fn stopped(&self, e: wasmtime::Error) -> Error {
        if self.store.data().memory.hit {
            return Error::MemoryLimit(self.limits.memory_bytes);
        }
        match e.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => Error::Deadline(self.limits.call_deadline),
            Some(Trap::OutOfFuel) => Error::OutOfFuel(self.limits.fuel_per_call.unwrap_or(0)),
            _ => Error::Trap(format!("{e:#}")),
        }
    }
}

/// A store whose guest sees `dir` and nothing else, under `limits`, armed for its first call.
pub(crate) fn sandbox(engine: &Engine, dir: &Path, limits: &Limits) -> Result<Store<HostState>> {
    // No environment, arguments, network or stdio. Calls are synchronous, so file operations
    // run on this thread rather than hopping to tokio's blocking pool and back (a WAL append
    // per put made that hop cost ~45 µs).
    let wasi = WasiCtxBuilder::new()
        .preopened_dir(dir, GUEST_DIR, FsPerms::ReadWrite)
        .map_err(host("preopening the store's directory"))?
        .allow_blocking_current_thread(true)
        .build();
    let mut store = Store::new(
        engine,
        HostState {
            wasi,
            table: ResourceTable::new(),
            memory: MemoryCap {
                max: limits.memory_bytes,
                hit: false,
            },
        },
    );
    store.limiter(|s| &mut s.memory);
    arm(&mut store, limits)?;
    Ok(store)
}

/// Sets the deadline (and fuel) for the next call.
fn arm(store: &mut Store<HostState>, limits: &Limits) -> Result<()> {
    let ticks = (limits.call_deadline.as_millis() / TICK.as_millis()).max(1);
    store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX));
    if let Some(fuel) = limits.fuel_per_call {
        store.set_fuel(fuel).map_err(host("setting fuel"))?;
    }
    Ok(())
}

/// The one place the guest's error variant becomes the host's.
fn from_guest(e: wit::Error) -> Error {
    match e {
        wit::Error::Corruption(s) => Error::Corruption(s),
        wit::Error::InvalidArgument(s) => Error::InvalidArgument(s),
        wit::Error::Io(s) => Error::Io(s),
        wit::Error::Busy(s) => Error::Busy(s),
        wit::Error::Closed => Error::Closed,
        wit::Error::NotFound(s) => Error::NotFound(s),
        wit::Error::Other(s) => Error::Other(s),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_sees_its_directory_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let (mut instance, _) = Instance::start(dir.path(), &Limits::default()).unwrap();
        for path in [
            "/",
            "/etc",
            "/tmp",
            "/store/../..",
            "../",
            "store/../../etc",
        ] {
            let r = instance.call(|s, g| g.db().call_open(s, path, crate::default_options()));
            assert!(r.is_err(), "the guest opened {path}");
        }
        let db = instance
            .call(|s, g| g.db().call_open(s, GUEST_DIR, crate::default_options()))
            .unwrap();
        instance
            .call(|s, g| g.db().call_put(s, db, b"k", b"v", true))
            .unwrap();
        assert!(
            dir.path().join("CURRENT").is_file(),
            "the store lives in the preopened directory"
        );
    }
}
