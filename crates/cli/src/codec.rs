//! How keys and values are written on the command line: UTF-8 text, or hex after `0x`.

/// Parses `0x…` as hex, anything else as its UTF-8 bytes.
pub fn decode(s: &str) -> Result<Vec<u8>, String> {
    let Some(hex) = s.strip_prefix("0x") else {
        return Ok(s.as_bytes().to_vec());
    };
    if !hex.is_ascii() {
        return Err(format!(
            "{s}: not valid hex (only 0-9, a-f and A-F after 0x)"
        ));
    }
    if hex.len() % 2 != 0 {
        return Err(format!("{s}: hex needs an even number of digits"));
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|_| format!("{s}: not valid hex")))
        .collect()
}

/// `b` as text when `decode` would read that text back as `b`: UTF-8 not starting with `0x`,
/// with no control character but those in `allowed`.
fn as_text<'a>(b: &'a [u8], allowed: &[char]) -> Option<&'a str> {
    std::str::from_utf8(b)
        .ok()
        .filter(|s| !s.starts_with("0x"))
        .filter(|s| s.chars().all(|c| !c.is_control() || allowed.contains(&c)))
}

/// Prints printable UTF-8 as is, anything else as `0x…` hex.
pub fn encode(b: &[u8]) -> String {
    match as_text(b, &[]) {
        Some(s) => s.to_string(),
        None => {
            let mut out = String::with_capacity(2 + b.len() * 2);
            out.push_str("0x");
            for byte in b {
                out.push_str(&format!("{byte:02x}"));
            }
            out
        }
    }
}

/// A value as `get` shows it alone: text as is, lines and tabs included (one trailing newline
/// added unless it ends with one), anything else as `encode` does.
pub fn value_text(b: &[u8]) -> String {
    match as_text(b, &['\n', '\t', '\r']) {
        Some(s) if s.ends_with('\n') => s.to_string(),
        Some(s) => format!("{s}\n"),
        None => format!("{}\n", encode(b)),
    }
}

/// Writes a value to stdout for `get` (see [`value_text`]).
pub fn print_value(b: &[u8], raw: bool) -> Result<(), String> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let written = if raw {
        out.write_all(b)
    } else {
        out.write_all(value_text(b).as_bytes())
    };
    written
        .and_then(|()| out.flush())
        .map_err(|e| format!("stdout: {e}"))
}

/// The bytes `start..end` of a value of `len` bytes that `--range SPEC` names: `A-B` (both
/// inclusive, B cut at the end), `A-` (to the end) or `-N` (the last N bytes).
pub fn resolve_range(spec: &str, len: u64) -> Result<(u64, u64), String> {
    let bad = || format!("--range {spec:?}: expected A-B, A- or -N (byte offsets)");
    let (a, b) = spec.split_once('-').ok_or_else(bad)?;
    let number = |s: &str| {
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
            .ok_or_else(bad)
    };
    let (start, end) = match (a.is_empty(), b.is_empty()) {
        (true, false) => (len.saturating_sub(number(b)?), len),
        (false, true) => (number(a)?, len),
        (false, false) => {
            let (a, b) = (number(a)?, number(b)?);
            if a > b {
                return Err(format!(
                    "--range {spec:?}: the first offset is past the last"
                ));
            }
            (a, b.saturating_add(1).min(len))
        }
        (true, true) => return Err(bad()),
    };
    if start >= len && !(start == 0 && len == 0 && a.is_empty()) {
        return Err(format!(
            "--range {spec:?} starts past the end of the {len}-byte value"
        ));
    }
    Ok((start, end))
}

/// The smallest key greater than every key with `prefix`, or `None` when there is none.
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last != 0xff {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

/// A scan bound; `None` is open.
pub type Bound = Option<Vec<u8>>;

/// The bounds `scan` reads: `[prefix, its successor)`, or `[from, to)` (either may be open).
pub fn scan_bounds(
    prefix: Option<&str>,
    from: Option<&str>,
    to: Option<&str>,
) -> Result<(Bound, Bound), String> {
    match prefix {
        Some(p) => {
            let p = decode(p)?;
            let end = prefix_successor(&p);
            Ok((Some(p), end))
        }
        None => Ok((from.map(decode).transpose()?, to.map(decode).transpose()?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_resolve_against_the_value_length() {
        assert_eq!(resolve_range("2-5", 10), Ok((2, 6)));
        assert_eq!(resolve_range("2-500", 10), Ok((2, 10)));
        assert_eq!(resolve_range("7-", 10), Ok((7, 10)));
        assert_eq!(resolve_range("-3", 10), Ok((7, 10)));
        assert_eq!(resolve_range("-30", 10), Ok((0, 10)));
        for bad in ["", "-", "5", "a-b", "5-2", "1-2-3", "+1-2"] {
            assert!(resolve_range(bad, 10).is_err(), "{bad}");
        }
        assert!(
            resolve_range("10-", 10)
                .unwrap_err()
                .contains("past the end")
        );
        assert!(resolve_range("0-0", 0).is_err());
    }

    #[test]
    fn round_trips() {
        assert_eq!(decode("abc").unwrap(), b"abc");
        assert_eq!(decode("0x00ff10").unwrap(), vec![0, 255, 16]);
        assert!(decode("0x0").is_err());
        assert!(decode("0xzz").is_err());
        // A multi-byte character must not be cut in half by the digit pairs.
        assert!(decode("0xaé1").is_err());
        assert!(decode("0xé").is_err());
        assert_eq!(encode(b"users/alice"), "users/alice");
        assert_eq!(encode(&[0, 1]), "0x0001");
        assert_eq!(
            value_text(b"meow\n"),
            "meow\n",
            "a text file prints as text"
        );
        assert_eq!(value_text(b"a\tb\nc"), "a\tb\nc\n");
        assert_eq!(value_text(b"{\"age\": 31}"), "{\"age\": 31}\n");
        assert_eq!(value_text(&[0, 1]), "0x0001\n");
        assert_eq!(
            encode(b"meow\n"),
            "0x6d656f770a",
            "scan keeps one entry a line"
        );
        assert_eq!(
            encode(b"0xab"),
            "0x30786162",
            "text that looks like hex is hex-encoded"
        );
        assert_eq!(decode(&encode(&[0xff, 0])).unwrap(), vec![0xff, 0]);
    }

    #[test]
    fn successors() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(b"\xff\xff"), None);
    }
}
