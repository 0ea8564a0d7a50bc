//! Running a stream on a fresh store, and shrinking a failing one to a short sequence that
//! still fails.

use super::*;

/// Runs a stream on a fresh store.
pub(super) fn execute(cfg: Config, ops: impl Iterator<Item = Op>) -> Result<Tally, Failure> {
    let mut done = 0;
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let mut runner = Runner::new(cfg);
        for op in ops {
            runner.step(&op);
            done += 1;
            // Under WASI the background work runs when the embedder asks, as a host does.
            if done % 64 == 0
                && let Some(db) = &runner.db
            {
                common::background_work(db);
            }
        }
        runner.finish()
    }));
    outcome.map_err(|payload| Failure {
        at: done,
        message: payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default(),
    })
}

/// Simpler forms of one operation: a batch or a MultiGet with one element fewer.
pub(super) fn simpler(op: &Op) -> Vec<Op> {
    fn without<T: Clone>(items: &[T], i: usize) -> Vec<T> {
        let mut v = items.to_vec();
        v.remove(i);
        v
    }
    match op {
        Op::Batch(w) if w.len() > 1 => (0..w.len()).map(|i| Op::Batch(without(w, i))).collect(),
        Op::MultiGet { keys, at } if keys.len() > 1 => (0..keys.len())
            .map(|i| Op::MultiGet {
                keys: without(keys, i),
                at: *at,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Shrinks a failing stream until `deadline`: drops ever smaller chunks of operations, then
/// simplifies the operations left, keeping each change that still fails. Returns the smallest
/// failing stream and its failure, or `None` when the stream does not fail when replayed.
pub(super) fn shrink(cfg: Config, ops: Vec<Op>, deadline: Instant) -> Option<(Vec<Op>, Failure)> {
    let fails = |ops: &[Op]| execute(cfg, ops.iter().cloned()).err();
    // A failure that depends on background timing may need a few replays to show again.
    let mut failure = (0..3).find_map(|_| fails(&ops))?;
    let mut ops = ops;
    ops.truncate(failure.at + 1);
    let mut chunk = ops.len().div_ceil(2).max(1);
    loop {
        let mut progress = false;
        let mut i = 0;
        while i < ops.len() && Instant::now() < deadline {
            let end = (i + chunk).min(ops.len());
            let candidate: Vec<Op> = ops[..i].iter().chain(&ops[end..]).cloned().collect();
            match fails(&candidate) {
                Some(f) => {
                    ops = candidate;
                    ops.truncate(f.at + 1);
                    failure = f;
                    progress = true;
                }
                None => i += chunk,
            }
        }
        if Instant::now() >= deadline || (chunk == 1 && !progress) {
            break;
        }
        chunk = (chunk / 2).max(1);
    }
    let mut i = 0;
    while i < ops.len() && Instant::now() < deadline {
        let found = simpler(&ops[i]).into_iter().find_map(|op| {
            let mut candidate = ops.clone();
            candidate[i] = op;
            fails(&candidate).map(|f| (candidate, f))
        });
        match found {
            Some((candidate, f)) => {
                ops = candidate;
                failure = f;
            }
            None => i += 1,
        }
    }
    Some((ops, failure))
}

/// Runs `f` without printing the panics of the failing replays it makes.
pub(super) fn quietly<T>(f: impl FnOnce() -> T) -> T {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let out = f();
    std::panic::set_hook(hook);
    out
}
