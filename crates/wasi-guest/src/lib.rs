//! The engine as a WebAssembly component (see `wit/`): [`store`] exports `strata:kv/store`, the
//! whole engine for hosts that embed Strata; [`keyvalue`] exports `wasi:keyvalue` (store, batch,
//! atomics) over the same store, buckets being column families. The guest has no threads: the
//! engine runs with the inline executor and the host drives background work through
//! `maintenance`.

mod keyvalue;
mod open_stores;
mod store;

wit_bindgen::generate!({ path: "../../wit", world: "engine" });

struct Component;

export!(Component);
