//! Log lines written to stderr by a thread of their own, many per system call: `strata serve`
//! logs every mutation, and a write to stderr per request cost its PUTs an eighth of their rate.
//!
//! - A line is in the buffer when the logging call returns, and on stderr within `EVERY`: the
//!   writer wakes on its own that often, not per line (waking it per line cost as much as the
//!   write it saved), and at once when `WAKE_AT` bytes wait.
//! - The buffer holds at most `MAX_BUFFERED` bytes; past that a logging call waits for the
//!   writer, as a direct write to a slow stderr would.
//! - Dropping the `Flusher` `init` returns writes out what is left and ends the writer; a
//!   SIGKILL loses at most the lines of the batch under way.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

/// Bytes of log lines the buffer holds before logging calls wait for the writer.
const MAX_BUFFERED: usize = 1 << 20;

/// Bytes of log lines that wake the writer before its time.
const WAKE_AT: usize = 64 << 10;

/// How long a line waits in the buffer at most (unless stderr itself is slow).
const EVERY: Duration = Duration::from_millis(20);

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when lines arrive, when the buffer drains, and at the end.
    changed: Condvar,
}

#[derive(Default)]
struct State {
    lines: Vec<u8>,
    closing: bool,
}

/// The sink env_logger writes each formatted line into.
struct Batched(Arc<Shared>);

impl Write for Batched {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut st = self.0.state.lock();
        while st.lines.len() >= MAX_BUFFERED && !st.closing {
            self.0.changed.wait(&mut st);
        }
        let before = st.lines.len();
        st.lines.extend_from_slice(buf);
        drop(st);
        if before < WAKE_AT && before + buf.len() >= WAKE_AT {
            self.0.changed.notify_all();
        }
        Ok(buf.len())
    }

    /// The writer thread writes the lines out; a flush here would be a system call per line.
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes what is left and stops the writer when dropped.
pub struct Flusher {
    shared: Arc<Shared>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.shared.state.lock().closing = true;
        self.shared.changed.notify_all();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

/// Installs env_logger (RUST_LOG, else `default_filter`) writing through a batching thread.
/// `None` when a logger was installed already or the thread could not start: logging then
/// stays as it was.
pub fn init(default_filter: &str) -> Option<Flusher> {
    let shared = Arc::new(Shared::default());
    let for_writer = shared.clone();
    let writer = std::thread::Builder::new()
        .name("strata-log".into())
        .spawn(move || write_out(&for_writer))
        .ok()?;
    let env = env_logger::Env::default().default_filter_or(default_filter);
    let installed = env_logger::Builder::from_env(env)
        .target(env_logger::Target::Pipe(Box::new(Batched(shared.clone()))))
        .try_init();
    let flusher = Flusher {
        shared,
        writer: Some(writer),
    };
    installed.is_ok().then_some(flusher)
}

/// The writer: takes every line buffered so far and writes them to stderr in one call, until
/// closed with nothing left.
fn write_out(shared: &Shared) {
    let mut batch = Vec::new();
    loop {
        {
            let mut st = shared.state.lock();
            if st.lines.len() < WAKE_AT && !st.closing {
                shared.changed.wait_for(&mut st, EVERY);
            }
            if st.lines.is_empty() {
                if st.closing {
                    return;
                }
                continue;
            }
            std::mem::swap(&mut batch, &mut st.lines);
        }
        shared.changed.notify_all();
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(&batch);
        let _ = err.flush();
        batch.clear();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Lines from many threads all reach the writer, whole and in each thread's order, and a
    /// full buffer holds its writers back rather than growing.
    #[test]
    fn every_line_is_written_whole_and_a_full_buffer_waits() {
        let shared = Arc::new(Shared::default());
        let out = Arc::new(Mutex::new(Vec::<u8>::new()));
        let drained = shared.clone();
        let sink = out.clone();
        let reader = std::thread::spawn(move || {
            loop {
                let mut st = drained.state.lock();
                while st.lines.is_empty() && !st.closing {
                    drained.changed.wait(&mut st);
                }
                if st.lines.is_empty() {
                    return;
                }
                // A slow stderr: the buffer fills meanwhile.
                assert!(st.lines.len() <= MAX_BUFFERED + 200, "{}", st.lines.len());
                sink.lock().append(&mut st.lines);
                drop(st);
                drained.changed.notify_all();
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        std::thread::scope(|s| {
            for t in 0..4 {
                let shared = shared.clone();
                s.spawn(move || {
                    let mut w = Batched(shared);
                    for i in 0..20_000 {
                        w.write_all(format!("{t} {i:06} {}\n", "x".repeat(100)).as_bytes())
                            .unwrap();
                    }
                });
            }
        });
        shared.state.lock().closing = true;
        shared.changed.notify_all();
        reader.join().unwrap();
        let text = String::from_utf8(out.lock().clone()).unwrap();
        for t in 0..4 {
            let mine: Vec<usize> = text
                .lines()
                .filter_map(|l| l.strip_prefix(&format!("{t} ")))
                .map(|l| l[..6].parse().unwrap())
                .collect();
            assert_eq!(mine, (0..20_000).collect::<Vec<_>>(), "thread {t}");
        }
    }
}
