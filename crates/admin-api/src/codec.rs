//! The pure mapping between JSON and the engine: keys and values as base64 (or UTF-8 on request),
//! page tokens, and batch operations. Unit-tested without a server.

use std::borrow::Cow;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE, URL_SAFE_NO_PAD};
use serde::{Deserialize, Serialize};

use crate::problem::Problem;

/// How keys and values travel in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// Standard base64 (binary-safe; the default).
    #[default]
    Base64,
    /// Plain UTF-8 strings; bytes that are not UTF-8 answer 422.
    Utf8,
}

impl Encoding {
    pub fn decode(self, field: &str, s: &str) -> Result<Vec<u8>, Problem> {
        self.decode_named(s, || field.to_string())
            .map(Cow::into_owned)
    }

    pub fn encode(self, field: &str, b: &[u8]) -> Result<String, Problem> {
        // Sized at once, not grown through `Display`: a value on the pool may be large.
        Ok(match self.encode_named(b, || field.to_string())? {
            Encoded::Text(s) => s.to_owned(),
            Encoded::Base64(b) => base64(b),
        })
    }

    /// `decode`, naming the field (`keys[7]`) only when it is wrong: a batch of many keys
    /// formats no names. UTF-8 text is its own bytes, borrowed.
    pub fn decode_named<'a>(
        self,
        s: &'a str,
        field: impl FnOnce() -> String,
    ) -> Result<Cow<'a, [u8]>, Problem> {
        match self {
            Encoding::Utf8 => Ok(Cow::Borrowed(s.as_bytes())),
            Encoding::Base64 => STANDARD
                .decode(s)
                .map(Cow::Owned)
                .map_err(|e| Problem::bad_request(format!("{} is not valid base64: {e}", field()))),
        }
    }

    /// `encode`, naming the field only when it cannot be shown. The answer borrows `b`: it is
    /// written into the JSON answer (`Encoded::write_json`) or a `String`, not copied first.
    pub fn encode_named(
        self,
        b: &[u8],
        field: impl FnOnce() -> String,
    ) -> Result<Encoded<'_>, Problem> {
        match self {
            Encoding::Base64 => Ok(Encoded::Base64(b)),
            Encoding::Utf8 => std::str::from_utf8(b).map(Encoded::Text).map_err(|_| {
                Problem::unprocessable(format!(
                    "{} is not UTF-8; ask without encoding=utf8 for base64",
                    field()
                ))
            }),
        }
    }
}

/// Bytes as they travel in JSON, borrowed: text as itself, anything else as standard base64,
/// written straight into an answer (`write_json`).
#[derive(Debug, Clone, Copy)]
pub enum Encoded<'a> {
    Text(&'a str),
    Base64(&'a [u8]),
}

impl Encoded<'_> {
    /// Appends this as a JSON string, quoted, to `out`: text escaped as serde_json escapes it,
    /// base64 encoded in place (it needs no escaping).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.push(b'"');
        match self {
            Encoded::Text(s) => escape_json_into(out, s),
            Encoded::Base64(b) => {
                let start = out.len();
                out.resize(start + base64_len(b.len()), 0);
                // The room is exactly the encoded length, so this cannot fail.
                let _ = STANDARD.encode_slice(b, &mut out[start..]);
            }
        }
        out.push(b'"');
    }
}

/// The length of `n` bytes in padded base64.
fn base64_len(n: usize) -> usize {
    n.div_ceil(3) * 4
}

/// Appends `s` to `out` escaped as the inside of a JSON string, byte for byte as serde_json
/// writes it (`\"`, `\\`, `\n`-style escapes for the five it names, `\u00XX` for the other
/// controls). serde_json looks at one byte at a time; this looks at 16, and copies a run with
/// nothing to escape whole: the answer to a batchGet of text values is mostly this.
pub fn escape_json_into(out: &mut Vec<u8>, s: &str) {
    const CHUNK: usize = 16;
    let bytes = s.as_bytes();
    out.reserve(bytes.len());
    let mut clean_from = 0;
    let mut at = 0;
    while at < bytes.len() {
        if let Some(chunk) = bytes.get(at..at + CHUNK) {
            // No early exit: the compiler compares all 16 at once.
            let dirty = chunk.iter().fold(false, |any, &b| any | needs_escape(b));
            if !dirty {
                at += CHUNK;
                continue;
            }
        }
        let end = (at + CHUNK).min(bytes.len());
        for i in at..end {
            let b = bytes[i];
            if needs_escape(b) {
                out.extend_from_slice(&bytes[clean_from..i]);
                clean_from = i + 1;
                match b {
                    b'"' => out.extend_from_slice(b"\\\""),
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\r' => out.extend_from_slice(b"\\r"),
                    b'\t' => out.extend_from_slice(b"\\t"),
                    0x08 => out.extend_from_slice(b"\\b"),
                    0x0c => out.extend_from_slice(b"\\f"),
                    _ => {
                        const HEX: &[u8; 16] = b"0123456789abcdef";
                        out.extend_from_slice(b"\\u00");
                        out.push(HEX[usize::from(b >> 4)]);
                        out.push(HEX[usize::from(b & 0xf)]);
                    }
                }
            }
        }
        at = end;
    }
    out.extend_from_slice(&bytes[clean_from..]);
}

/// Whether JSON needs `b` escaped inside a string.
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// `b` in standard base64, as keys and values travel in JSON.
pub fn base64(b: &[u8]) -> String {
    STANDARD.encode(b)
}

/// A key in a URL path: base64url, without padding or with its canonical padding (as many
/// encoders write it), as the document's pattern says.
pub fn decode_path_key(s: &str) -> Result<Vec<u8>, Problem> {
    let engine = if s.ends_with('=') {
        &URL_SAFE
    } else {
        &URL_SAFE_NO_PAD
    };
    engine
        .decode(s)
        .map_err(|e| Problem::bad_request(format!("key in the path is not base64url: {e}")))
}

pub fn encode_path_key(key: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(key)
}

/// Where a paged scan resumes: the snapshot it reads and the first key it has not returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageToken {
    /// The server-side snapshot the pages read (`scan` keeps it alive for a while).
    pub snapshot: u64,
    /// Resume at this key (inclusive going forward; exclusive going backward).
    pub next: Vec<u8>,
}

impl PageToken {
    pub fn encode(&self) -> String {
        let mut raw = self.snapshot.to_le_bytes().to_vec();
        raw.extend_from_slice(&self.next);
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// The token `s`: malformed (400) unless it is canonical base64url of at least 8 bytes,
    /// as the document's pattern says; whether its snapshot is still open is the caller's.
    pub fn decode(s: &str) -> Result<PageToken, Problem> {
        let raw = decode_page_token(s)?;
        let (id, next) = raw
            .split_first_chunk::<8>()
            .ok_or_else(|| Problem::bad_request("page_token is malformed"))?;
        Ok(PageToken {
            snapshot: u64::from_le_bytes(*id),
            next: next.to_vec(),
        })
    }
}

/// The shortest page token: base64url of 8 bytes.
pub const PAGE_TOKEN_MIN_CHARS: usize = 11;

/// The bytes of a page token, any route's: canonical base64url of at least 8 bytes, or 400.
pub fn decode_page_token(s: &str) -> Result<Vec<u8>, Problem> {
    URL_SAFE_NO_PAD
        .decode(s)
        .ok()
        .filter(|raw| raw.len() >= 8)
        .ok_or_else(|| Problem::bad_request("page_token is malformed"))
}

/// A page token that is well formed but names no page this server can resume.
pub fn page_gone() -> Problem {
    Problem::new(
        axum::http::StatusCode::GONE,
        "page_token names no page this server has open (it expired, or the server restarted): \
         start again",
    )
}

/// The bytes of query parameter `name` in the raw query string `query`: percent-decoded (and
/// `+` as a space) to bytes, so that a key that is not UTF-8 survives. The first one wins.
pub fn query_bytes(query: &str, name: &str) -> Option<Vec<u8>> {
    let decode = |s: &str| -> Vec<u8> {
        let spaced = s.replace('+', " ");
        percent_encoding::percent_decode_str(&spaced).collect()
    };
    query.split('&').find_map(|pair| {
        let (n, v) = pair.split_once('=').unwrap_or((pair, ""));
        (decode(n) == name.as_bytes()).then(|| decode(v))
    })
}

/// One operation of a `kv:batchWrite`, as JSON.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(tag = "op", rename_all = "camelCase", deny_unknown_fields)]
pub enum BatchOp {
    Put {
        key: String,
        value: String,
        /// Seconds until the key expires: 1 to 4294967295 (136 years).
        #[serde(default, deserialize_with = "ttl_secs")]
        #[schema(value_type = Option<u64>, minimum = 1, maximum = 4294967295.0)]
        ttl: Option<std::num::NonZeroU32>,
    },
    Delete {
        key: String,
    },
    DeleteRange {
        start: String,
        end: String,
    },
}

/// A batch's operations, each a JSON object: serde would also read a tagged enum from an array
/// of its fields, which the document does not describe.
pub(crate) fn batch_ops<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<BatchOp>, D::Error> {
    Vec::<serde_json::Value>::deserialize(d)?
        .into_iter()
        .enumerate()
        .map(|(i, op)| {
            if !op.is_object() {
                return Err(serde::de::Error::custom(format!(
                    "ops[{i}] is not an object"
                )));
            }
            serde_json::from_value(op)
                .map_err(|e| serde::de::Error::custom(format!("ops[{i}]: {e}")))
        })
        .collect()
}

/// A TTL of `secs` seconds when it is 1 to 4294967295; else what is wrong, showing the input as
/// `shown`. The one rule for the query's `ttl` and a batch's.
pub(crate) fn ttl_in_range(
    secs: Option<u64>,
    shown: &dyn std::fmt::Display,
) -> Result<std::num::NonZeroU32, String> {
    secs.and_then(|s| u32::try_from(s).ok())
        .and_then(std::num::NonZeroU32::new)
        .ok_or_else(|| format!("ttl {shown} is not a whole number of seconds from 1 to 4294967295"))
}

/// A whole number written in decimal digits only (no sign, no space), as a query string
/// carries an integer; `None` for anything else or past `u64`.
pub(crate) fn parse_whole(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A whole number in a query or header as the document types integers (int64): digits only,
/// 0 to 2^63 - 1.
pub(crate) fn parse_int64(s: &str) -> Option<u64> {
    parse_whole(s).filter(|n| *n <= i64::MAX as u64)
}

/// A whole number in a JSON body, or none: JSON Schema's `integer` is any number without a
/// fraction, so `412.0` is 412 as much as `412` is. The document types them int64: above
/// 2^63 - 1 is refused.
pub(crate) fn whole_number<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<u64>, D::Error> {
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    let whole = n.as_u64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < u64::MAX as f64)
            .map(|f| f as u64)
    });
    let whole = whole.filter(|n| *n <= i64::MAX as u64);
    whole.map(Some).ok_or_else(|| {
        serde::de::Error::custom(format!("{n} is not a whole number from 0 to {}", i64::MAX))
    })
}

/// A TTL in a JSON body (`ttl_in_range`).
fn ttl_secs<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<std::num::NonZeroU32>, D::Error> {
    let Some(secs) = whole_number(d)? else {
        return Ok(None);
    };
    ttl_in_range(Some(secs), &secs)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// A batch operation with its bytes decoded and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        ttl: Option<u64>,
    },
    Delete {
        key: Vec<u8>,
    },
    DeleteRange {
        start: Vec<u8>,
        end: Vec<u8>,
    },
}

/// Decodes `ops`, naming the first bad one by its index.
/// An empty or inverted `deleteRange` deletes nothing and is left out (no schema can say
/// "start before end", so the server takes what the schema allows; the engine itself refuses
/// such a range).
pub fn decode_ops(ops: &[BatchOp], enc: Encoding) -> Result<Vec<Op>, Problem> {
    let ops: Vec<Op> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let at = |f: &str| format!("ops[{i}].{f}");
            Ok(match op {
                BatchOp::Put { key, value, ttl } => Op::Put {
                    key: enc.decode(&at("key"), key)?,
                    value: enc.decode(&at("value"), value)?,
                    ttl: ttl.map(|t| u64::from(t.get())),
                },
                BatchOp::Delete { key } => Op::Delete {
                    key: enc.decode(&at("key"), key)?,
                },
                BatchOp::DeleteRange { start, end } => {
                    let (start, end) = (
                        enc.decode(&at("start"), start)?,
                        enc.decode(&at("end"), end)?,
                    );
                    Op::DeleteRange { start, end }
                }
            })
        })
        .collect::<Result<_, Problem>>()?;
    Ok(ops
        .into_iter()
        .filter(|op| !matches!(op, Op::DeleteRange { start, end } if start >= end))
        .collect())
}

/// A scan's bounds: keys under `prefix` (when given) and in `[start, end)` (each when given),
/// both at once when both are given. An empty or inverted range is an empty scan, not an error:
/// no schema can say "start before end", so the server takes every request the schema does.
pub fn scan_bounds(
    prefix: Option<Vec<u8>>,
    start: Option<Vec<u8>>,
    end: Option<Vec<u8>>,
) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let prefix_upper = prefix.as_deref().map(prefix_end);
    let lower = match (prefix, start) {
        (Some(p), Some(s)) => Some(p.max(s)),
        (p, s) => p.or(s),
    };
    let upper = match (prefix_upper, end) {
        // A prefix of only 0xff bytes has no end: only `end` bounds it.
        (Some(Some(p)), Some(e)) => Some(p.min(e)),
        (Some(p), None) => p,
        (Some(None), e) | (None, e) => e,
    };
    (lower, upper)
}

/// The first key after every key starting with `prefix` (`None`: no such key).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text escapes byte for byte as serde_json escapes it: every byte alone, at every place
    /// in and around a 16-byte run, and long random strings; base64 is the engine's.
    #[test]
    fn values_are_written_into_json_as_serde_json_writes_them() {
        let ours = |s: &str| {
            let mut out = Vec::new();
            Encoded::Text(s).write_json(&mut out);
            String::from_utf8(out).unwrap()
        };
        for c in (0u32..0x80).chain([0xe9, 0x2028, 0x1f600]) {
            let c = char::from_u32(c).unwrap();
            for pad in [0, 1, 15, 16, 17, 31, 40] {
                for s in [
                    format!("{}{c}", "a".repeat(pad)),
                    format!("{c}{}", "b".repeat(pad)),
                ] {
                    assert_eq!(ours(&s), serde_json::to_string(&s).unwrap(), "{s:?}");
                }
            }
        }
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..200 {
            let s: String = (0..(x % 300))
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Mostly letters; a quote, backslash or control one time in five.
                    let odd = [b'"', b'\\', b'\n', b'\t', 0x01, 0x08, 0x0c, 0x1f];
                    char::from(if x.is_multiple_of(5) {
                        odd[(x / 5 % 8) as usize]
                    } else {
                        b'a' + (x % 26) as u8
                    })
                })
                .collect();
            assert_eq!(ours(&s), serde_json::to_string(&s).unwrap(), "{s:?}");
        }
        for n in 0..20 {
            let b: Vec<u8> = (0..n).map(|i| (i * 37) as u8).collect();
            let mut out = Vec::new();
            Encoded::Base64(&b).write_json(&mut out);
            assert_eq!(out, format!("\"{}\"", base64(&b)).into_bytes());
        }
    }

    #[test]
    fn a_scan_is_bounded_by_prefix_and_range_at_once() {
        let v = |s: &str| Some(s.as_bytes().to_vec());
        assert_eq!(scan_bounds(v("ab"), None, None), (v("ab"), v("ac")));
        assert_eq!(scan_bounds(None, v("b"), v("d")), (v("b"), v("d")));
        // Both: the keys under the prefix within the range.
        assert_eq!(scan_bounds(v("ab"), v("abc"), v("b")), (v("abc"), v("ac")));
        assert_eq!(scan_bounds(v("ab"), v("a"), v("abz")), (v("ab"), v("abz")));
        // An inverted range stays inverted: the scan is empty, not refused.
        assert_eq!(scan_bounds(None, v("d"), v("b")), (v("d"), v("b")));
        // A prefix with no end is bounded by `end` alone.
        let ff = Some(vec![0xff, 0xff]);
        assert_eq!(scan_bounds(ff.clone(), None, None), (ff.clone(), None));
        assert_eq!(scan_bounds(ff.clone(), None, v("z")), (ff, v("z")));
    }

    #[test]
    fn keys_round_trip_through_both_encodings_and_bad_input_is_a_problem() {
        let b = Encoding::Base64;
        assert_eq!(
            b.decode("key", &b.encode("key", b"\x00\xff").unwrap())
                .unwrap(),
            b"\x00\xff"
        );
        assert_eq!(b.decode("key", "!!").unwrap_err().status, 400);
        let u = Encoding::Utf8;
        assert_eq!(u.encode("value", b"caf\xc3\xa9").unwrap(), "café");
        assert_eq!(u.encode("value", b"\xff").unwrap_err().status, 422);
        assert_eq!(
            decode_path_key(&encode_path_key(b"users/a?b")).unwrap(),
            b"users/a?b"
        );
        assert_eq!(decode_path_key("dXNlcnM=").unwrap(), b"users");
        assert_eq!(decode_path_key("dXNlcnM").unwrap(), b"users");
        for bad in ["***", "dXNlcnM==", "dXNlcnM=====", "==", "QQ="] {
            assert!(decode_path_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_whole_number_may_be_written_with_a_zero_fraction() {
        #[derive(Deserialize)]
        struct N {
            #[serde(default, deserialize_with = "whole_number")]
            n: Option<u64>,
        }
        let n = |s: &str| serde_json::from_str::<N>(s).map(|n| n.n);
        assert_eq!(n(r#"{"n": 412}"#).unwrap(), Some(412));
        assert_eq!(n(r#"{"n": 412.0}"#).unwrap(), Some(412));
        // Read exactly, not to the nearest few ulps (serde_json's `float_roundtrip`):
        // Schemathesis sent this one, and the quick parse made it ...763.25.
        assert_eq!(
            n(r#"{"n": 1905815767973763.0}"#).unwrap(),
            Some(1_905_815_767_973_763)
        );
        assert_eq!(n(r#"{"n": null}"#).unwrap(), None);
        assert_eq!(n("{}").unwrap(), None);
        assert_eq!(
            n(r#"{"n": 9223372036854775807}"#).unwrap(),
            Some(i64::MAX as u64)
        );
        for bad in [
            r#"{"n": 4.5}"#,
            r#"{"n": -1}"#,
            r#"{"n": "1"}"#,
            r#"{"n": 1e300}"#,
            r#"{"n": 9223372036854775808}"#,
        ] {
            assert!(n(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_whole_number_in_a_query_is_digits_only() {
        assert_eq!(parse_whole("0"), Some(0));
        assert_eq!(parse_whole("0005"), Some(5));
        assert_eq!(parse_whole("18446744073709551615"), Some(u64::MAX));
        for bad in [
            "",
            "+5",
            "-5",
            " 5",
            "5 ",
            "5.0",
            "18446744073709551616",
            "0x10",
        ] {
            assert_eq!(parse_whole(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn query_parameters_keep_bytes_that_are_not_utf8() {
        let q = "cf=a&prefix=users%2F%80%FF+x&start=&end";
        assert_eq!(query_bytes(q, "prefix").unwrap(), b"users/\x80\xff x");
        assert_eq!(query_bytes(q, "start").unwrap(), b"");
        assert_eq!(query_bytes(q, "end").unwrap(), b"");
        assert_eq!(query_bytes(q, "limit"), None);
        assert_eq!(query_bytes("pre%66ix=a&prefix=b", "prefix").unwrap(), b"a");
    }

    #[test]
    fn page_tokens_round_trip_and_garbage_is_refused() {
        let t = PageToken {
            snapshot: 7,
            next: b"k\x00".to_vec(),
        };
        assert_eq!(PageToken::decode(&t.encode()).unwrap(), t);
        assert!(PageToken::decode("short").is_err());
        assert!(PageToken::decode("@@@").is_err());
    }

    #[test]
    fn a_ttl_is_1_to_4294967295_seconds_and_a_bad_one_says_so() {
        assert_eq!(ttl_in_range(Some(60), &60).unwrap().get(), 60);
        assert_eq!(
            ttl_in_range(Some(4_294_967_295), &0).unwrap().get(),
            u32::MAX
        );
        for bad in [Some(0), Some(4_294_967_296), None] {
            let e = ttl_in_range(bad, &"it").unwrap_err();
            assert!(
                e.contains("ttl it is not") && e.contains("from 1 to 4294967295"),
                "{e}"
            );
        }
        let zero: Result<Vec<BatchOp>, _> =
            serde_json::from_str(r#"[{"op":"put","key":"YQ==","value":"MQ==","ttl":0}]"#);
        assert!(zero.unwrap_err().to_string().contains("ttl 0 is not"));
    }

    #[test]
    fn batch_ops_decode_and_name_the_bad_one() {
        let ops: Vec<BatchOp> = serde_json::from_str(
            r#"[{"op":"put","key":"YQ==","value":"MQ==","ttl":5},{"op":"delete","key":"Yg=="},
                {"op":"deleteRange","start":"YQ==","end":"Yg=="}]"#,
        )
        .unwrap();
        let decoded = decode_ops(&ops, Encoding::Base64).unwrap();
        assert_eq!(
            decoded[0],
            Op::Put {
                key: b"a".to_vec(),
                value: b"1".to_vec(),
                ttl: Some(5)
            }
        );
        // An inverted or empty range deletes nothing: left out, not refused.
        let inverted: Vec<BatchOp> = serde_json::from_str(
            r#"[{"op":"deleteRange","start":"Yg==","end":"YQ=="},
                {"op":"deleteRange","start":"YQ==","end":"YQ=="},{"op":"delete","key":"YQ=="}]"#,
        )
        .unwrap();
        assert_eq!(
            decode_ops(&inverted, Encoding::Base64).unwrap(),
            [Op::Delete { key: b"a".to_vec() }]
        );
        let bad: Vec<BatchOp> =
            serde_json::from_str(r#"[{"op":"delete","key":"YQ=="},{"op":"delete","key":"%"}]"#)
                .unwrap();
        assert!(
            decode_ops(&bad, Encoding::Base64)
                .unwrap_err()
                .detail
                .contains("ops[1].key")
        );
        assert!(serde_json::from_str::<Vec<BatchOp>>(r#"[{"op":"merge","key":"YQ=="}]"#).is_err());
    }

    #[test]
    fn a_prefix_ends_at_its_successor() {
        assert_eq!(prefix_end(b"ab").unwrap(), b"ac");
        assert_eq!(prefix_end(b"a\xff").unwrap(), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), None);
    }
}
