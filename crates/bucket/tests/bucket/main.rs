//! The bucket backend against a real SeaweedFS (started once for the binary, on free loopback
//! ports, telemetry off): stores reopened from their cache and from nothing, fencing, racing
//! writers, checkpoints and garbage collection (`store`); faults between the store and the
//! bucket and SeaweedFS stopped under load (`faults`); writers killed at random moments
//! (`crash`); checkpoints, leases and clones (`versions`), backups (`backups`), replicas
//! (`replicas`) and the reads they hold across rounds (`replica_reads`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod backups;
mod crash;
mod durability;
mod faults;
mod model;
mod replica_reads;
mod replicas;
mod store;
mod support;
mod versions;
