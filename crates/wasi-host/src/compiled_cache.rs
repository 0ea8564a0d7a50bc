//! The on-disk cache of compiled components, so that a start after the first does not compile
//! the guest again (`Limits::cache_dir`).
//!
//! Invariants:
//! - a file's name holds a hash of the component's bytes and of everything of wasmtime's build
//!   and configuration that compiled code depends on; a file is only ever loaded by an engine of
//!   that hash, and wasmtime checks its header again;
//! - a file is written aside and renamed into place, so a concurrent start never reads half of
//!   one; a damaged file is compiled over;
//! - every other build of the guest, of wasmtime or of a configuration leaves its own file. A
//!   load refreshes its file's modification time, and writing a new file removes those of this
//!   cache unused for `UNUSED_FOR`, so the directory does not grow with every upgrade.

use std::hash::{Hash, Hasher};
use std::path::Path;
use std::time::{Duration, SystemTime};

use wasmtime::Engine;
use wasmtime::component::Component;

use crate::error::Result;
use crate::runtime::{guest_component, host};

/// A cached file not loaded for this long is removed when another one is written.
const UNUSED_FOR: Duration = Duration::from_secs(30 * 24 * 3600);
const PREFIX: &str = "strata-guest-";

/// The component, from the cache in `dir` when a compatible one is there, else compiled (and
/// cached). Also says whether it was compiled now and whether it came from the cache.
pub(crate) fn load(engine: &Engine, dir: Option<&Path>) -> Result<(Component, bool, bool)> {
    let wasm = guest_component();
    let Some(dir) = dir else {
        let c = Component::new(engine, wasm).map_err(host("compiling the component"))?;
        return Ok((c, true, false));
    };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    wasm.hash(&mut h);
    engine.precompile_compatibility_hash().hash(&mut h);
    let path = dir.join(format!("{PREFIX}{:016x}.cwasm", h.finish()));
    // Read, not mapped: a file truncated under a mapping would kill the process with SIGBUS.
    if let Ok(bytes) = std::fs::read(&path) {
        // SAFETY: the file is one this function wrote with `precompile_component` for an engine
        // of the same compatibility hash (it is in the name), into a directory of the user's own;
        // wasmtime still checks its header and refuses a file from another version or config
        // (the damaged-file case is tested).
        if let Ok(c) = unsafe { Component::deserialize(engine, &bytes) } {
            // A cache that cannot be written (read-only) still serves; it is only never pruned.
            let _ = std::fs::File::options()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_modified(SystemTime::now()));
            return Ok((c, false, true));
        }
    }
    let bytes = engine
        .precompile_component(wasm)
        .map_err(host("compiling the component"))?;
    // Written aside and renamed, so a concurrent start never reads half a file.
    if std::fs::create_dir_all(dir).is_ok() {
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, &bytes).is_ok() {
            let _ = std::fs::rename(&tmp, &path);
        }
        remove_unused(dir, SystemTime::now());
    }
    // SAFETY: `bytes` was produced by `precompile_component` on this very engine just above.
    let c = unsafe { Component::deserialize(engine, &bytes) }
        .map_err(host("loading the compiled component"))?;
    Ok((c, true, false))
}

/// Removes this cache's files in `dir` (compiled components, and the leftovers of writes that
/// crashed before their rename) not modified within `UNUSED_FOR` of `now`. Other files stay.
fn remove_unused(dir: &Path, now: SystemTime) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        let unused = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > UNUSED_FOR));
        if unused {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use wasmtime::Config;
    use wasmtime::component::Linker;

    use super::*;
    use crate::bindings;
    use crate::runtime::{Limits, sandbox};

    #[test]
    fn a_second_start_loads_the_compiled_component_from_the_cache() {
        let cache = tempfile::tempdir().unwrap();
        let engine = Engine::new(Config::new().epoch_interruption(true)).unwrap();
        let (_, compiled, from_disk) = load(&engine, Some(cache.path())).unwrap();
        assert!(compiled && !from_disk);
        let began = Instant::now();
        let (c, compiled, from_disk) = load(&engine, Some(cache.path())).unwrap();
        assert!(!compiled && from_disk, "read back, not compiled again");
        eprintln!("warm load {:?}", began.elapsed());
        // What was read back runs.
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut store = sandbox(&engine, dir.path(), &Limits::default()).unwrap();
        bindings::Engine::instantiate(&mut store, &c, &linker).unwrap();
        // A damaged cache file is compiled over, not trusted.
        for f in std::fs::read_dir(cache.path()).unwrap() {
            std::fs::write(f.unwrap().path(), b"not a compiled component").unwrap();
        }
        let (_, compiled, from_disk) = load(&engine, Some(cache.path())).unwrap();
        assert!(compiled && !from_disk);
    }

    fn age(path: &Path, by: Duration) {
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_modified(SystemTime::now() - by).unwrap();
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// Files of other builds go once unused for the bound; one in use is kept fresh by its
    /// loads; files that are not the cache's are never touched.
    #[test]
    fn files_unused_for_a_month_are_removed_and_loads_keep_theirs() {
        let cache = tempfile::tempdir().unwrap();
        let dir = cache.path();
        let engine = Engine::new(Config::new().epoch_interruption(true)).unwrap();
        load(&engine, Some(dir)).unwrap();
        let [ours] = names(dir).try_into().unwrap();
        let month = UNUSED_FOR + Duration::from_secs(3600);
        for (name, old) in [
            ("strata-guest-00000000000000aa.cwasm", true),
            ("strata-guest-00000000000000bb.tmp4242", true),
            ("strata-guest-00000000000000cc.cwasm", false),
            ("notes.txt", true),
        ] {
            std::fs::write(dir.join(name), b"x").unwrap();
            if old {
                age(&dir.join(name), month);
            }
        }
        // Loaded after a month unused: still there, and fresh again.
        age(&dir.join(&ours), month);
        let (_, compiled, _) = load(&engine, Some(dir)).unwrap();
        assert!(!compiled);
        let modified = std::fs::metadata(dir.join(&ours))
            .unwrap()
            .modified()
            .unwrap();
        assert!(SystemTime::now().duration_since(modified).unwrap() < Duration::from_secs(3600));
        // Another build (here another configuration) writes its file: the month-old ones of
        // the cache go.
        let other = Engine::new(Config::new().epoch_interruption(true).consume_fuel(true)).unwrap();
        let (_, compiled, _) = load(&other, Some(dir)).unwrap();
        assert!(compiled);
        let left = names(dir);
        assert_eq!(left.len(), 4, "{left:?}");
        for kept in ["notes.txt", "strata-guest-00000000000000cc.cwasm", &ours] {
            assert!(left.iter().any(|n| n == kept), "{kept} is gone: {left:?}");
        }
    }
}
