//! How far a write is synced before it is answered: the `sync` query parameter and body field.
//! One mapping from the API's words to the engine's [`WriteOptions`], unit-tested here.

use serde::Deserialize;
use strata_engine::{Durability, WriteOptions};

/// `false` (the default): answered once the write is in the WAL, not synced. `true`: the WAL
/// synced as far as the store's default durability. `"local"`: synced to this machine's disk.
/// `"bucket"`: synced to the store's bucket (on a local store, the same as `true`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub(crate) enum SyncTo {
    Flag(bool),
    Level(SyncLevel),
}

/// A durability named by a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SyncLevel {
    Local,
    Bucket,
}

impl Default for SyncTo {
    fn default() -> Self {
        SyncTo::Flag(false)
    }
}

impl SyncTo {
    /// The query parameter's words: `1`, `true`, `0`, `false`, `local`, `bucket`.
    fn parse(s: &str) -> Option<SyncTo> {
        Some(match s {
            "1" | "true" => SyncTo::Flag(true),
            "0" | "false" => SyncTo::Flag(false),
            "local" => SyncTo::Level(SyncLevel::Local),
            "bucket" => SyncTo::Level(SyncLevel::Bucket),
            _ => return None,
        })
    }

    pub(crate) fn write_options(self) -> WriteOptions {
        let (sync, durability) = match self {
            SyncTo::Flag(sync) => (sync, None),
            SyncTo::Level(SyncLevel::Local) => (true, Some(Durability::Local)),
            SyncTo::Level(SyncLevel::Bucket) => (true, Some(Durability::Remote)),
        };
        WriteOptions {
            sync,
            durability,
            ..WriteOptions::default()
        }
    }
}

/// Deserializes a `sync` query parameter (a string, as every query value is).
pub(crate) fn query<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SyncTo, D::Error> {
    let s = String::deserialize(d)?;
    SyncTo::parse(&s).ok_or_else(|| {
        serde::de::Error::custom(format!("{s:?} is not 1, 0, true, false, local or bucket"))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_word_maps_to_its_write_options() {
        let cases = [
            ("0", false, None),
            ("false", false, None),
            ("1", true, None),
            ("true", true, None),
            ("local", true, Some(Durability::Local)),
            ("bucket", true, Some(Durability::Remote)),
        ];
        for (word, sync, durability) in cases {
            let o = SyncTo::parse(word).unwrap().write_options();
            assert_eq!((o.sync, o.durability), (sync, durability), "{word}");
        }
        assert_eq!(SyncTo::parse("remote"), None);
        assert_eq!(SyncTo::parse(""), None);
    }

    #[test]
    fn a_body_says_it_as_a_boolean_or_a_level() {
        let parse = |j: &str| serde_json::from_str::<SyncTo>(j);
        assert_eq!(parse("true").unwrap(), SyncTo::Flag(true));
        assert_eq!(parse("false").unwrap(), SyncTo::Flag(false));
        assert_eq!(
            parse("\"bucket\"").unwrap(),
            SyncTo::Level(SyncLevel::Bucket)
        );
        assert_eq!(parse("\"local\"").unwrap(), SyncTo::Level(SyncLevel::Local));
        assert!(parse("\"disk\"").is_err());
        assert!(parse("1").is_err());
    }
}
