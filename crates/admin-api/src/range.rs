//! Pure: the `Range` header of a raw `GET` (RFC 9110 §14), resolved against a value's length.
//!
//! One range of bytes is served (`bytes=A-B`, `bytes=A-`, `bytes=-N`); a header that is not one
//! such range (another unit, several ranges, bad syntax, `A > B`) is ignored, as the RFC allows,
//! and the whole value is served.

/// What a `Range` header asks of a value of a given length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wanted {
    /// The whole value (no header, or one that is ignored).
    Whole,
    /// Bytes `start..end` (end exclusive, within the value, never empty).
    Part { start: u64, end: u64 },
    /// No byte of the range lies within the value: 416.
    Unsatisfiable,
}

/// Resolves `header` (the `Range` header's value, if any) against a value of `len` bytes. A
/// position too large for 64 bits lies past any value (a first one: 416; a last one: the end).
pub(crate) fn wanted(header: Option<&str>, len: u64) -> Wanted {
    let Some(spec) = header.map(str::trim).and_then(|h| {
        let unit = h.get(..6)?;
        unit.eq_ignore_ascii_case("bytes=").then(|| &h[6..])
    }) else {
        return Wanted::Whole;
    };
    let Some((first, last)) = spec.trim().split_once('-') else {
        return Wanted::Whole;
    };
    let number = |s: &str| -> Option<u64> {
        let s = s.trim();
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().unwrap_or(u64::MAX))
    };
    match (first.trim().is_empty(), last.trim().is_empty()) {
        // `-N`: the last N bytes.
        (true, false) => match number(last) {
            None => Wanted::Whole,
            Some(0) => Wanted::Unsatisfiable,
            Some(_) if len == 0 => Wanted::Unsatisfiable,
            Some(n) => Wanted::Part {
                start: len - n.min(len),
                end: len,
            },
        },
        // `A-`: from A to the end.
        (false, true) => match number(first) {
            None => Wanted::Whole,
            Some(a) if a >= len => Wanted::Unsatisfiable,
            Some(a) => Wanted::Part { start: a, end: len },
        },
        // `A-B`, inclusive.
        (false, false) => match (number(first), number(last)) {
            (Some(a), Some(b)) if a <= b => {
                if a >= len {
                    Wanted::Unsatisfiable
                } else {
                    Wanted::Part {
                        start: a,
                        end: b.saturating_add(1).min(len),
                    }
                }
            }
            _ => Wanted::Whole,
        },
        (true, true) => Wanted::Whole,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(start: u64, end: u64) -> Wanted {
        Wanted::Part { start, end }
    }

    #[test]
    fn single_ranges_resolve_as_the_rfc_says() {
        assert_eq!(wanted(None, 10), Wanted::Whole);
        assert_eq!(wanted(Some("bytes=0-0"), 10), part(0, 1));
        assert_eq!(wanted(Some("bytes=2-5"), 10), part(2, 6));
        assert_eq!(wanted(Some("bytes=2-500"), 10), part(2, 10));
        assert_eq!(wanted(Some("bytes=7-"), 10), part(7, 10));
        assert_eq!(wanted(Some("bytes=-3"), 10), part(7, 10));
        assert_eq!(wanted(Some("bytes=-30"), 10), part(0, 10));
        assert_eq!(
            wanted(Some("bytes=0-18446744073709551615"), 10),
            part(0, 10)
        );
    }

    #[test]
    fn ranges_outside_the_value_are_unsatisfiable() {
        assert_eq!(wanted(Some("bytes=10-"), 10), Wanted::Unsatisfiable);
        assert_eq!(wanted(Some("bytes=10-20"), 10), Wanted::Unsatisfiable);
        assert_eq!(wanted(Some("bytes=-0"), 10), Wanted::Unsatisfiable);
        assert_eq!(wanted(Some("bytes=0-"), 0), Wanted::Unsatisfiable);
        assert_eq!(wanted(Some("bytes=-5"), 0), Wanted::Unsatisfiable);
        assert_eq!(
            wanted(Some("bytes=99999999999999999999999-"), 10),
            Wanted::Unsatisfiable
        );
    }

    #[test]
    fn the_unit_is_case_insensitive_and_huge_last_positions_mean_the_end() {
        assert_eq!(wanted(Some("Bytes=2-3"), 10), part(2, 4));
        assert_eq!(wanted(Some("BYTES=-2"), 10), part(8, 10));
        assert_eq!(
            wanted(Some("bytes=3-99999999999999999999999"), 10),
            part(3, 10)
        );
        assert_eq!(
            wanted(Some("bytes=-99999999999999999999999"), 10),
            part(0, 10)
        );
    }

    #[test]
    fn headers_that_are_not_one_byte_range_are_ignored() {
        for h in [
            "items=0-1",
            "bytes=0-1,3-4",
            "bytes=5-2",
            "bytes=a-b",
            "bytes=-",
            "bytes=1",
            "bytes=+1-2",
        ] {
            assert_eq!(wanted(Some(h), 10), Wanted::Whole, "{h}");
        }
    }
}
