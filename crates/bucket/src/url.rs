//! `s3://BUCKET/PREFIX`: where a bucket store lives.

use std::fmt;

use strata_engine::{Error, Result};

/// A bucket and a prefix in it (no leading or trailing `/`; empty for the bucket's root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketUrl {
    pub bucket: String,
    pub prefix: String,
}

impl BucketUrl {
    /// True when `s` names a bucket store rather than a directory.
    pub fn is_bucket(s: &str) -> bool {
        s.starts_with("s3://")
    }

    pub fn parse(s: &str) -> Result<BucketUrl> {
        let bad =
            |why: &str| Error::InvalidArgument(format!("{s:?} is not s3://BUCKET/PREFIX: {why}"));
        let rest = s
            .strip_prefix("s3://")
            .ok_or_else(|| bad("it does not start with s3://"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        // S3's rules for bucket names, which every compatible server accepts.
        let valid_bucket = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            && !bucket.starts_with(['-', '.'])
            && !bucket.ends_with(['-', '.']);
        if !valid_bucket {
            return Err(bad(
                "a bucket name is 3 to 63 lowercase letters, digits, '-' and '.'",
            ));
        }
        let prefix = prefix.trim_end_matches('/');
        let segments_ok = prefix.is_empty()
            || prefix.split('/').all(|seg| {
                !seg.is_empty()
                    && seg != "."
                    && seg != ".."
                    && seg
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            });
        if !segments_ok {
            return Err(bad(
                "a prefix is '/'-separated names of letters, digits, '-', '_' and '.'",
            ));
        }
        Ok(BucketUrl {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
        })
    }
}

impl fmt::Display for BucketUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn urls_parse_into_bucket_and_prefix() {
        let u = BucketUrl::parse("s3://my-bucket/stores/one/").unwrap();
        assert_eq!(
            (u.bucket.as_str(), u.prefix.as_str()),
            ("my-bucket", "stores/one")
        );
        assert_eq!(u.to_string(), "s3://my-bucket/stores/one");
        let root = BucketUrl::parse("s3://abc").unwrap();
        assert_eq!(root.prefix, "");
    }

    #[test]
    fn bad_urls_say_why() {
        for bad in [
            "/tmp/x",
            "s3://",
            "s3://ab",
            "s3://Upper/x",
            "s3://b-ok/../x",
            "s3://b-ok/a//b",
            "s3://b-ok/a b",
            "s3://-b/x",
        ] {
            let e = BucketUrl::parse(bad).unwrap_err();
            assert!(e.to_string().contains("s3://BUCKET/PREFIX"), "{bad}: {e}");
        }
    }
}
