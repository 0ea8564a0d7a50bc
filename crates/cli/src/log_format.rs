//! One log line as env_logger's default format writes it, `[2026-11-28T05:19:21Z INFO  target]
//! message`, with its colours on a terminal: written here into a buffer of the calling thread, so
//! that `log_lines` holds its lock only to copy the finished line. (env_logger formats into a
//! buffer of its own and then copies it under a mutex of its own, which two workers logging a
//! mutation each contended for on every request.)
//!
//! - The timestamp is UTC to the second, formatted once per second per thread.
//! - The lines of a message after its first are indented by four spaces; its other control
//!   characters and bidirectional overrides are written escaped (`\u{1b}`), and a backslash
//!   as `\\`, so a key cannot forge a line, a colour or the order of what a line shows.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use env_logger::fmt::style::{AnsiColor, Effects, Style};
use log::{Level, Record};

/// Appends `record`'s line, with colours when `styled`, to `out`.
pub fn write_line(out: &mut Vec<u8>, record: &Record<'_>, styled: bool) {
    let subtle = if styled {
        AnsiColor::BrightBlack.on_default()
    } else {
        Style::new()
    };
    let level_style = if styled {
        level_style(record.level())
    } else {
        Style::new()
    };
    // Writing into a Vec fails only when memory does, which aborts first.
    let _ = write!(out, "{subtle}[{subtle:#}");
    now_stamp(|stamp| out.extend_from_slice(stamp));
    let _ = write!(out, " {level_style}{:<5}{level_style:#}", record.level());
    if !record.target().is_empty() {
        let _ = write!(out, " {}", record.target());
    }
    let _ = write!(out, "{subtle}]{subtle:#} ");
    let _ = write!(Indented(out), "{}", record.args());
    out.push(b'\n');
}

/// The colour env_logger gives each level.
fn level_style(level: Level) -> Style {
    match level {
        Level::Trace => AnsiColor::Cyan.on_default(),
        Level::Debug => AnsiColor::Blue.on_default(),
        Level::Info => AnsiColor::Green.on_default(),
        Level::Warn => AnsiColor::Yellow.on_default(),
        Level::Error => AnsiColor::Red.on_default().effects(Effects::BOLD),
    }
}

/// A message's bytes, each line after the first indented, and every other control character
/// (C0, DEL, C1) and bidirectional override written as `\u{NN}`, a backslash as `\\`: a
/// message names keys, which anyone who may write may choose, and neither a key's newline nor
/// its escape sequence may pass for a line or a colour of the server's own.
struct Indented<'a>(&'a mut Vec<u8>);

impl Indented<'_> {
    fn push_char(&mut self, c: char) {
        match c {
            '\n' => self.0.extend_from_slice(b"\n    "),
            '\t' => self.0.push(b'\t'),
            '\\' => self.0.extend_from_slice(b"\\\\"),
            c if c.is_control() || is_bidi_control(c) => {
                let _ = write!(self.0, "\\u{{{:x}}}", u32::from(c));
            }
            c => self
                .0
                .extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
}

/// The characters that reorder text around them when shown (Unicode's explicit directional
/// formatting characters).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

impl Write for Indented<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // Most messages are plain ASCII: copied whole.
        if buf.iter().all(|&b| (0x20..0x7f).contains(&b) && b != b'\\') {
            self.0.extend_from_slice(buf);
            return Ok(buf.len());
        }
        // `write!` hands over whole `str` pieces, so a character is never split across calls.
        match std::str::from_utf8(buf) {
            Ok(text) => text.chars().for_each(|c| self.push_char(c)),
            Err(_) => {
                for &b in buf {
                    if b.is_ascii() {
                        self.push_char(char::from(b));
                    } else {
                        let _ = write!(self.0, "\\x{b:02x}");
                    }
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

thread_local! {
    /// This thread's last timestamp: the second it names and its text.
    static STAMP: std::cell::Cell<(u64, [u8; 20])> = const { std::cell::Cell::new((u64::MAX, [0; 20])) };
}

/// Gives `f` the current time as `YYYY-MM-DDTHH:MM:SSZ`.
fn now_stamp(f: impl FnOnce(&[u8])) {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (at, mut text) = STAMP.get();
    if at != secs {
        text = stamp(secs);
        STAMP.set((secs, text));
    }
    f(&text);
}

/// `secs` after the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`, for output other than the log's.
pub fn utc_text(secs: u64) -> String {
    String::from_utf8_lossy(&stamp(secs)).into_owned()
}

/// `secs` after the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (years 0 to 9999).
fn stamp(secs: u64) -> [u8; 20] {
    let (y, m, d) = civil_from_days(secs / 86_400);
    let s = secs % 86_400;
    let mut text = [0u8; 20];
    let mut cursor = &mut text[..];
    let _ = write!(
        cursor,
        "{:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        y.min(9999),
        s / 3600,
        s / 60 % 60,
        s % 60
    );
    text
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn timestamps_are_utc_dates_to_the_second() {
        let at = |secs| String::from_utf8(stamp(secs).to_vec()).unwrap();
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_795_843_161), "2026-11-28T05:19:21Z");
        assert_eq!(at(253_402_300_799), "9999-12-31T23:59:59Z");
        // Every day for 400 years, against the days a month has.
        let mut secs = 0;
        let (mut y, mut m, mut d) = (1970, 1, 1);
        for _ in 0..146_097 {
            assert_eq!(civil_from_days(secs / 86_400), (y, m, d));
            secs += 86_400;
            let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
            let days = [
                31,
                if leap { 29 } else { 28 },
                31,
                30,
                31,
                30,
                31,
                31,
                30,
                31,
                30,
                31,
            ];
            d += 1;
            if d > days[m as usize - 1] {
                (d, m) = (1, m + 1);
                if m > 12 {
                    (m, y) = (1, y + 1);
                }
            }
        }
    }

    fn line(level: Level, target: &str, msg: std::fmt::Arguments<'_>, styled: bool) -> String {
        let mut out = Vec::new();
        let record = Record::builder()
            .level(level)
            .target(target)
            .args(msg)
            .build();
        write_line(&mut out, &record, styled);
        String::from_utf8(out).unwrap()
    }

    /// `[2026-...Z` as `[TS`: two lines written a second apart still compare equal.
    fn masked(line: &str) -> String {
        let b = line.as_bytes();
        let at = (0..b.len().saturating_sub(19)).find(|&i| {
            b[i + 4] == b'-' && b[i + 10] == b'T' && b[i + 13] == b':' && b[i + 19] == b'Z'
        });
        match at {
            Some(i) => format!("{}TS{}", &line[..i], &line[i + 20..]),
            None => line.to_string(),
        }
    }

    /// A writer env_logger writes into, read back afterwards.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Byte for byte what env_logger itself writes for the same record (its default format,
    /// with and without colours, every level, a later line indented), but for the time.
    #[test]
    fn lines_are_env_loggers_own() {
        use log::Log;
        for styled in [false, true] {
            for level in [
                Level::Error,
                Level::Warn,
                Level::Info,
                Level::Debug,
                Level::Trace,
            ] {
                for target in ["strata::api", ""] {
                    let out = Captured::default();
                    let theirs = env_logger::Builder::new()
                        .filter_level(log::LevelFilter::Trace)
                        .write_style(if styled {
                            env_logger::WriteStyle::Always
                        } else {
                            env_logger::WriteStyle::Never
                        })
                        .target(env_logger::Target::Pipe(Box::new(out.clone())))
                        .build();
                    let args = format_args!("put k (5 bytes) cf=\"default\"\nsecond line");
                    let record = Record::builder()
                        .level(level)
                        .target(target)
                        .args(args)
                        .build();
                    theirs.log(&record);
                    let theirs = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
                    let mut ours = Vec::new();
                    write_line(&mut ours, &record, styled);
                    let ours = String::from_utf8(ours).unwrap();
                    assert_eq!(
                        masked(&ours),
                        masked(&theirs),
                        "{level} {target:?} {styled}"
                    );
                }
            }
        }
    }

    /// The line env_logger's default format writes: the bracketed header, the message, its
    /// later lines indented; colours only when asked for, around the brackets and the level.
    #[test]
    fn lines_read_as_env_loggers_default_format() {
        let plain = line(
            Level::Info,
            "strata::api",
            format_args!("put k cf=\"default\""),
            false,
        );
        let (head, rest) = plain.split_at(21);
        assert!(head.starts_with("[20") && head.ends_with('Z'), "{plain:?}");
        assert_eq!(rest, " INFO  strata::api] put k cf=\"default\"\n");
        let two = line(
            Level::Warn,
            "",
            format_args!("a\nb\t\u{1b}[31mc\r \u{9b}31m \u{202e}x \\u{{1b}} é"),
            false,
        );
        assert_eq!(
            &two[21..],
            " WARN ] a\n    b\t\\u{1b}[31mc\\u{d} \\u{9b}31m \\u{202e}x \\\\u{1b} é\n"
        );
        let coloured = line(Level::Error, "t", format_args!("x"), true);
        assert!(
            coloured.starts_with("\u{1b}[90m[\u{1b}[0m20"),
            "{coloured:?}"
        );
        assert!(
            coloured.ends_with("Z \u{1b}[1m\u{1b}[31mERROR\u{1b}[0m t\u{1b}[90m]\u{1b}[0m x\n"),
            "{coloured:?}"
        );
    }
}
