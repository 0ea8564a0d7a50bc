//! The engine's integration tests, one binary: each module is one area, through the public API.
//! Two tests are binaries of their own: the model test runs long and swaps the panic hook while it
//! shrinks; the crash test runs its own binary as the child it kills, and a fork taken while other
//! tests hold a store's lock would carry that lock into the child until it execs.

mod common;

mod background_error;
mod bad_input;
mod blob;
mod blob_crash;
mod blob_fifo;
mod block_cache;
mod catch_up;
mod column_families;
mod compaction;
mod corruption;
mod damage;
mod db;
mod fault_injection;
mod files;
mod folding;
mod huge;
mod live_files;
mod module_graph;
mod multi_get;
mod partial;
mod range_del;
mod ranged;
mod replica_rounds;
mod resume;
mod sharing;
mod try_write;
mod value_file;
mod wal_crash;
mod wal_damage;
