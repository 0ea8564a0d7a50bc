//! The engine's integration tests, one binary: each module is one area, through the public API.
//! (The model test is its own binary: it runs long and swaps the panic hook while it shrinks.)

mod common;

mod background_error;
mod blob;
mod block_cache;
mod column_families;
mod compaction;
mod corruption;
mod crash;
mod damage;
mod db;
mod fault_injection;
mod module_graph;
mod multi_get;
mod range_del;
