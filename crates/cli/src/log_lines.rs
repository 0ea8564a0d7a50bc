//! Log lines written to stderr by a thread of their own, many per system call: `strata serve`
//! logs every mutation, and a write to stderr per request cost its PUTs an eighth of their rate.
//!
//! - A line is in the buffer when the logging call returns, and on stderr within `EVERY`: the
//!   writer wakes on its own that often, not per line (waking it per line cost as much as the
//!   write it saved), and at once when `WAKE_AT` bytes wait.
//! - A logging call never waits (it may run on an async worker that serves every request): the
//!   buffer holds at most `MAX_BUFFERED` bytes, and a line past that, when stderr does not keep
//!   up, is dropped and counted; the writer says how many when it next writes.
//! - Dropping the `Flusher` `init` returns writes out what is left and ends the writer;
//!   `flush_now` writes what is buffered before a forced exit; a line logged after the end goes
//!   straight to stderr. A SIGKILL loses at most `EVERY` of lines.
//! - A line is formatted on the logging thread, into a buffer of that thread (`log_format`),
//!   and the lock is held only to copy it in.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

/// Bytes of log lines the buffer holds before logging calls wait for the writer.
const MAX_BUFFERED: usize = 1 << 20;

/// Bytes of log lines that wake the writer before its time.
const WAKE_AT: usize = 64 << 10;

/// The most bytes of line buffer a logging thread keeps between lines.
const KEPT_LINE_BYTES: usize = 4 << 10;

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
    /// Lines dropped since the writer last wrote, the buffer being full.
    dropped: u64,
    closing: bool,
}

/// The buffer of the logger `init` installed, for `flush_now`.
static INSTALLED: std::sync::OnceLock<Arc<Shared>> = std::sync::OnceLock::new();

/// Writes the buffered lines now, on this thread: before `std::process::exit`, which runs no
/// destructor.
pub fn flush_now() {
    if let Some(shared) = INSTALLED.get() {
        let batch = std::mem::take(&mut shared.state.lock().lines);
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(&batch);
        let _ = err.flush();
    }
}

impl Shared {
    /// Adds a finished line to the buffer, or counts it dropped when the buffer is full; past
    /// the end it goes straight to stderr.
    fn push(&self, line: &[u8]) {
        let mut st = self.state.lock();
        if st.closing {
            drop(st);
            let _ = std::io::stderr().lock().write_all(line);
            return;
        }
        if st.lines.len() + line.len() > MAX_BUFFERED {
            st.dropped += 1;
            return;
        }
        let before = st.lines.len();
        st.lines.extend_from_slice(line);
        drop(st);
        if before < WAKE_AT && before + line.len() >= WAKE_AT {
            self.changed.notify_all();
        }
    }
}

/// The installed logger: env_logger's filter (RUST_LOG), env_logger's line format
/// (`log_format`), written into a buffer of the calling thread and handed to the writer.
struct Lines {
    filter: env_logger::Logger,
    styled: bool,
    shared: Arc<Shared>,
}

thread_local! {
    /// The line being formatted on this thread, kept for the next.
    static LINE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl log::Log for Lines {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        self.filter.enabled(metadata)
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.filter.matches(record) {
            return;
        }
        // A line logged while formatting one (a Display that logs) gets a buffer of its own.
        let format_and_push = |line: &mut Vec<u8>| {
            line.clear();
            crate::log_format::write_line(line, record, self.styled);
            self.shared.push(line);
            // A long line (a long message) leaves no long buffer behind on the thread.
            if line.capacity() > KEPT_LINE_BYTES {
                *line = Vec::new();
            }
        };
        let done = LINE.try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut line) => {
                format_and_push(&mut line);
                true
            }
            Err(_) => false,
        });
        if done != Ok(true) {
            format_and_push(&mut Vec::new());
        }
    }

    /// The writer thread writes the lines out; a flush here would be a system call per line.
    fn flush(&self) {}
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

/// Installs the logger: RUST_LOG (else `default_filter`) chooses the lines, a batching thread
/// writes them. `None` when a logger was installed already, or when the thread could not start:
/// env_logger then writes to stderr itself, a call per line.
pub fn init(default_filter: &str) -> Option<Flusher> {
    let env = env_logger::Env::default().default_filter_or(default_filter);
    let shared = Arc::new(Shared::default());
    let for_writer = shared.clone();
    let Ok(writer) = std::thread::Builder::new()
        .name("strata-log".into())
        .spawn(move || write_out(&for_writer))
    else {
        let _ = env_logger::Builder::from_env(env).try_init();
        return None;
    };
    let filter = env_logger::Builder::from_env(env).build();
    let max_level = filter.filter();
    let lines = Lines {
        filter,
        styled: styled(std::env::var("RUST_LOG_STYLE").ok().as_deref()),
        shared: shared.clone(),
    };
    let installed = log::set_boxed_logger(Box::new(lines));
    let flusher = Flusher {
        shared: shared.clone(),
        writer: Some(writer),
    };
    if installed.is_ok() {
        log::set_max_level(max_level);
        let _ = INSTALLED.set(shared);
    }
    installed.is_ok().then_some(flusher)
}

/// Whether lines carry colours: `RUST_LOG_STYLE` decides when it is `always` or `never`;
/// otherwise they are styled as anstream would style stderr itself: colours for a terminal,
/// unless `NO_COLOR`, `CLICOLOR=0` or `TERM=dumb` say no, or `CLICOLOR_FORCE` yes.
fn styled(rust_log_style: Option<&str>) -> bool {
    match rust_log_style {
        Some("always") => true,
        Some("never") => false,
        _ => anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never,
    }
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
            let dropped = std::mem::take(&mut st.dropped);
            if dropped > 0 {
                batch.extend_from_slice(
                    format!("[strata-log] {dropped} log lines dropped: stderr did not keep up\n")
                        .as_bytes(),
                );
            }
        }
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

    /// `always` and `never` are the user's choice, whatever stderr is.
    #[test]
    fn always_and_never_override_the_terminal() {
        assert!(styled(Some("always")));
        assert!(!styled(Some("never")));
    }

    /// Lines from many threads reach the writer whole and in each thread's order; when the
    /// writer falls behind, the buffer stays bounded and every line is either written or
    /// counted as dropped, and no logging call waits.
    #[test]
    fn every_line_is_written_whole_or_counted_and_the_buffer_stays_bounded() {
        let shared = Arc::new(Shared::default());
        let out = Arc::new(Mutex::new(Vec::<u8>::new()));
        let drained = shared.clone();
        let sink = out.clone();
        let reader = std::thread::spawn(move || {
            loop {
                let mut st = drained.state.lock();
                if st.lines.is_empty() && st.closing {
                    return;
                }
                assert!(st.lines.len() <= MAX_BUFFERED, "{}", st.lines.len());
                sink.lock().append(&mut st.lines);
                drop(st);
                // A slow stderr: the buffer fills meanwhile.
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let lines_each = 20_000;
        std::thread::scope(|s| {
            for t in 0..4 {
                let shared = shared.clone();
                s.spawn(move || {
                    for i in 0..lines_each {
                        shared.push(format!("{t} {i:06} {}\n", "x".repeat(100)).as_bytes());
                    }
                });
            }
        });
        shared.state.lock().closing = true;
        reader.join().unwrap();
        let text = String::from_utf8(out.lock().clone()).unwrap();
        let mut written = 0;
        for t in 0..4 {
            let mine: Vec<usize> = text
                .lines()
                .filter_map(|l| l.strip_prefix(&format!("{t} ")))
                .map(|l| l[..6].parse().unwrap())
                .collect();
            assert!(
                mine.windows(2).all(|w| w[0] < w[1]),
                "thread {t} out of order"
            );
            written += mine.len();
        }
        let dropped = shared.state.lock().dropped as usize;
        assert_eq!(written + dropped, 4 * lines_each);
        println!("{written} written, {dropped} dropped");
    }
}
