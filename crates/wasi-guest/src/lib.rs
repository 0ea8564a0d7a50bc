//! The engine as a WebAssembly component (see `wit/`): [`store`] exports `strata:kv/store`, the
//! whole engine for hosts that embed Strata; [`keyvalue`] exports `wasi:keyvalue` (store, batch,
//! atomics) over the same store, buckets being column families. The guest has no threads: the
//! engine runs with the inline executor and the host drives background work through
//! `maintenance`.

mod keyvalue;
mod open_stores;
mod store;

/// Talc rather than wasi-libc's dlmalloc: a read allocates a block buffer and each key a few small
/// vectors, and dlmalloc took 7.5% of a MultiGet's time. The guest has no threads, as talc's
/// cell requires (it panics at first use otherwise).
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

wit_bindgen::generate!({ path: "../../wit", world: "engine" });

struct Component;

export!(Component);
