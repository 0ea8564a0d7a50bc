//! Runs the tests' SeaweedFS for a test written in another language (the console's Playwright
//! spec): starts it on free loopback ports with telemetry off, prints one line,
//! `endpoint URL bucket NAME access KEY secret SECRET`, and stops it (deleting its data) when its
//! standard input closes. Exits 2, saying why, when `weed` is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/bucket/support/seaweed.rs"]
mod seaweed;

use std::io::Read;

fn main() {
    let Some(mut server) = seaweed::Seaweed::start() else {
        eprintln!("no SeaweedFS: `make deps` builds it into ~/.cache/strata/tools/bin/weed");
        std::process::exit(2);
    };
    println!(
        "endpoint {} bucket {} access {} secret {}",
        server.endpoint,
        seaweed::BUCKET,
        seaweed::ACCESS_KEY,
        seaweed::SECRET_KEY
    );
    // Whoever started this holds its input open for as long as the server is needed.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    server.stop();
}
