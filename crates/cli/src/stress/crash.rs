//! The crash-test driver: run the tool as a child, SIGKILL it at a random moment, restart.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::StressArgs;

/// The child's command line: ours without the driver's flags, with a new seed.
fn child_args(seed: u64) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for arg in std::env::args().skip(1) {
        if skip_value {
            skip_value = false;
            continue;
        }
        let name = arg.split('=').next().unwrap_or("");
        match name {
            "--crash_test" | "--until_killed" | "--verify_only" => continue,
            "--duration" | "--kill_interval" | "--seed" => {
                skip_value = !arg.contains('=');
                continue;
            }
            _ => out.push(arg),
        }
    }
    out.push("--until_killed".into());
    out.push("--seed".into());
    out.push(seed.to_string());
    out
}

/// The crash-test driver: start, SIGKILL, restart (which verifies), until `--duration` is up; a
/// final run verifies once more.
pub(super) fn crash_test(dir: &Path, args: &StressArgs) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(args.duration);
    let mut rng = StdRng::seed_from_u64(args.seed.unwrap_or_else(rand::random));
    let (mut cycles, mut resolved) = (0u64, 0u64);
    while Instant::now() < deadline {
        let mut child = Command::new(&exe)
            .args(child_args(rng.random()))
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let run_for =
            Duration::from_millis(rng.random_range(500..=args.kill_interval.max(1) * 1000));
        let started = Instant::now();
        let mut exited = None;
        while started.elapsed() < run_for {
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                exited = Some(status);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if exited.is_none() {
            child.kill().map_err(|e| e.to_string())?; // SIGKILL
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout);
        if let Some(status) = exited {
            return Err(format!(
                "cycle {cycles}: the stress run exited by itself ({status}) instead of being \
                 killed; its output:\n{text}"
            ));
        }
        if !text.contains("verified") {
            // Killed before it finished verifying: the next run verifies the same state.
            cycles += 1;
            continue;
        }
        resolved += text
            .lines()
            .find_map(|l| l.split('(').nth(1)?.split(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0);
        cycles += 1;
    }
    let out = Command::new(&exe)
        .args(child_args(0).into_iter().filter(|a| a != "--until_killed"))
        .arg("--verify_only")
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "final verification failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    println!(
        "crash test on {}: {cycles} SIGKILL cycles in {} s, every restart verified {} keys in {} \
         column families ({resolved} in-flight writes resolved); final verification passed",
        dir.display(),
        args.duration,
        args.max_key,
        args.column_families
    );
    Ok(())
}
