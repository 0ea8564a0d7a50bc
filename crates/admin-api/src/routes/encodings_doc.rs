//! The document's rules that span two fields, written as JSON Schema on the finished document
//! (utoipa's annotations describe one field at a time):
//!
//! - A body with an `encoding` is two variants, one per encoding: with `"encoding": "utf8"`
//!   its keys and values are any text; without it (or with `"base64"`) each is canonical
//!   standard base64, as the server decodes it. A client generated from the document, or a
//!   property-based tester, then knows which strings the server takes.
//! - A page token, in a body or a query, is canonical base64url of at least 8 bytes.
//! - A `PUT` without a body stores an empty value: its body is optional.
//! - `DELETE /cfs/{name}` never takes `default`.
//! - A raw body (`application/octet-stream`, sent or answered) is bytes: a binary string, not
//!   the array of numbers a `Vec<u8>` would be in JSON.
//! - The event stream's schema describes one event (Open API 3.1 reads `schema` of
//!   `text/event-stream` so): its `event` names the kind, `data` is JSON.

use serde_json::{Map, Value, json};

use crate::codec::PAGE_TOKEN_MIN_CHARS;

/// Standard base64 with its padding, canonical (the unused bits of a last partial group are
/// zero), as `Encoding::Base64` decodes it.
pub(crate) const BASE64: &str =
    "^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$";

/// Base64url without padding, canonical: page tokens.
pub(crate) const BASE64URL: &str =
    "^([A-Za-z0-9_-]{4})*([A-Za-z0-9_-][AQgw]|[A-Za-z0-9_-]{2}[AEIMQUYcgkosw048])?$";

/// A key in a path: base64url, canonical, unpadded or with its padding (`codec::decode_path_key`).
pub(crate) const PATH_KEY: &str =
    "^([A-Za-z0-9_-]{4})*([A-Za-z0-9_-][AQgw](==)?|[A-Za-z0-9_-]{2}[AEIMQUYcgkosw048]=?)?$";

/// The bodies that carry keys or values, and which of their properties do.
const ENCODED: &[(&str, &[&str])] = &[
    ("BatchGet", &["keys"]),
    ("BatchWrite", &["ops"]),
    ("DeleteRange", &["start", "end"]),
    ("ScanRequest", &["prefix", "start", "end"]),
    ("Target", &["start", "end"]),
    ("PutBody", &["value"]),
];

/// A batch operation's byte fields; its base64 form is the component `BatchOpBase64`.
const BATCH_OP_FIELDS: &[&str] = &["key", "value", "start", "end"];

/// The event kinds the stream sends (`events.rs`).
pub(crate) const EVENT_KINDS: &[&str] = &[
    "flush_begin",
    "flush",
    "compaction_begin",
    "compaction",
    "stall_begin",
    "stall_end",
    "background_error",
    "blob_gc",
    "blob_files_deleted",
    "lagged",
    "stats",
];

/// Applies every rule above to the document `doc`.
pub(crate) fn apply(doc: &mut Value) {
    let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if let Some(op) = schemas.get("BatchOp").cloned() {
        let mut base64 = op;
        for variant in base64["oneOf"].as_array_mut().into_iter().flatten() {
            with_pattern(&mut variant["properties"], BATCH_OP_FIELDS);
        }
        schemas.insert("BatchOpBase64".into(), base64);
    }
    for (name, fields) in ENCODED {
        if let Some(schema) = schemas.get_mut(*name) {
            *schema = split_by_encoding(schema.take(), fields);
        }
    }
    if let Some(props) = schemas
        .get_mut("ScanRequest")
        .and_then(|s| s.get_mut("oneOf"))
        .and_then(Value::as_array_mut)
    {
        for variant in props {
            variant["properties"]["page_token"] = page_token(json!(["string", "null"]));
        }
    }
    schemas.insert("ServerSentEvent".into(), server_sent_event());
    if let Some(put) = doc.pointer_mut("/paths/~1api~1v1~1kv~1{key}/put/requestBody") {
        put["required"] = json!(false);
    }
    for op in doc
        .pointer_mut("/paths")
        .and_then(Value::as_object_mut)
        .into_iter()
        .flat_map(|paths| paths.values_mut())
        .filter_map(Value::as_object_mut)
        .flat_map(|item| item.values_mut())
    {
        if let Some(content) = op.pointer_mut("/requestBody/content") {
            raw_is_binary(content);
        }
        let responses = op.get_mut("responses").and_then(Value::as_object_mut);
        for response in responses.into_iter().flat_map(|r| r.values_mut()) {
            if let Some(content) = response.get_mut("content") {
                raw_is_binary(content);
            }
        }
    }
    // The default column family is never dropped (the engine refuses, 400).
    for param in doc
        .pointer_mut("/paths/~1api~1v1~1cfs~1{name}/delete/parameters")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if param["name"] == "name" {
            param["schema"]["not"] = json!({"const": "default"});
        }
    }
    if let Some(stream) =
        doc.pointer_mut("/paths/~1api~1v1~1events/get/responses/200/content/text~1event-stream")
    {
        stream["schema"] = json!({"$ref": "#/components/schemas/ServerSentEvent"});
    }
}

/// A raw body of `content` (its `application/octet-stream`, if any) is a binary string.
fn raw_is_binary(content: &mut Value) {
    if let Some(raw) = content.get_mut("application/octet-stream") {
        raw["schema"] = json!({"type": "string", "format": "binary"});
    }
}

/// `schema` as two variants: `"encoding": "utf8"` with any text, or base64 (the default)
/// with `fields` in canonical base64.
fn split_by_encoding(schema: Value, fields: &[&str]) -> Value {
    let description = schema.get("description").cloned();
    let mut utf8 = schema.clone();
    utf8.as_object_mut().map(|o| o.remove("description"));
    utf8["properties"]["encoding"] = json!({"type": "string", "enum": ["utf8"]});
    let required = utf8
        .as_object_mut()
        .map(|o| o.entry("required").or_insert_with(|| json!([])));
    if let Some(Value::Array(required)) = required {
        required.push(json!("encoding"));
    }
    let mut base64 = schema;
    base64.as_object_mut().map(|o| o.remove("description"));
    base64["properties"]["encoding"] = json!({"type": "string", "enum": ["base64"]});
    with_pattern(&mut base64["properties"], fields);
    let mut out = Map::new();
    if let Some(d) = description {
        out.insert("description".into(), d);
    }
    out.insert("oneOf".into(), json!([base64, utf8]));
    Value::Object(out)
}

/// Gives each of `fields` in `properties` the base64 pattern: a string, the strings of an
/// array, or the batch operations of an array (their base64 form).
fn with_pattern(properties: &mut Value, fields: &[&str]) {
    for field in fields {
        let Some(p) = properties.get_mut(*field) else {
            continue;
        };
        if p["type"] == "array" {
            let items = &mut p["items"];
            if items.get("$ref").is_some() {
                *items = json!({"$ref": "#/components/schemas/BatchOpBase64"});
            } else {
                items["pattern"] = json!(BASE64);
            }
        } else {
            p["pattern"] = json!(BASE64);
        }
    }
}

/// A page token's schema, of type `ty`.
pub(crate) fn page_token(ty: Value) -> Value {
    json!({
        "type": ty,
        "description": "the `page_token` of the page before",
        "pattern": BASE64URL,
        "minLength": PAGE_TOKEN_MIN_CHARS,
    })
}

/// One event of the stream.
fn server_sent_event() -> Value {
    json!({
        "type": "object",
        "description": "One event: `event` names its kind, `data` is its JSON; `id` (absent on `stats` and `lagged`) resumes the stream as Last-Event-ID.",
        "required": ["event", "data"],
        "properties": {
            "id": {"type": "string", "pattern": "^[0-9]+$"},
            "event": {"type": "string", "enum": EVENT_KINDS},
            "data": {"type": "string", "contentMediaType": "application/json"},
            "retry": {"type": "integer", "minimum": 0},
        },
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

    /// The patterns accept exactly what the decoders take: every length of a last group, every
    /// last character and every padding, checked against the decoder.
    #[test]
    fn the_patterns_say_what_the_decoders_accept() {
        let alphabet = |url: bool| -> Vec<char> {
            let mut a: Vec<char> = ('A'..='Z').chain('a'..='z').chain('0'..='9').collect();
            a.extend(if url { ['-', '_'] } else { ['+', '/'] });
            a
        };
        let decodes = |pattern: &str, s: &str| match pattern {
            p if p == super::BASE64 => STANDARD.decode(s).is_ok(),
            p if p == super::BASE64URL => URL_SAFE_NO_PAD.decode(s).is_ok(),
            _ => crate::codec::decode_path_key(s).is_ok(),
        };
        for pattern in [super::BASE64, super::BASE64URL, super::PATH_KEY] {
            let url = pattern != super::BASE64;
            let re = regex::Regex::new(pattern).unwrap();
            for prefix in ["", "QUJD"] {
                for body in ["", "Q", "QU", "QUJ"] {
                    for last in alphabet(url).into_iter().chain(['=', '.']) {
                        for pad in ["", "=", "=="] {
                            let s = format!("{prefix}{body}{last}{pad}");
                            assert_eq!(re.is_match(&s), decodes(pattern, &s), "{pattern} {s:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_body_with_an_encoding_is_two_variants_and_only_base64_is_patterned() {
        let doc: serde_json::Value =
            serde_json::from_str(&super::super::openapi::document()).unwrap();
        let get = doc["components"]["schemas"]["BatchGet"]["oneOf"].clone();
        assert_eq!(get[0]["properties"]["encoding"]["enum"][0], "base64");
        assert_eq!(
            get[0]["properties"]["keys"]["items"]["pattern"],
            super::BASE64
        );
        assert_eq!(get[1]["properties"]["encoding"]["enum"][0], "utf8");
        assert!(
            get[1]["properties"]["keys"]["items"]
                .get("pattern")
                .is_none()
        );
        assert!(
            get[1]["required"]
                .as_array()
                .unwrap()
                .contains(&"encoding".into())
        );
        let write = &doc["components"]["schemas"]["BatchWrite"]["oneOf"];
        assert_eq!(
            write[0]["properties"]["ops"]["items"]["$ref"],
            "#/components/schemas/BatchOpBase64"
        );
        assert_eq!(
            doc["components"]["schemas"]["BatchOpBase64"]["oneOf"][0]["properties"]["key"]["pattern"],
            super::BASE64
        );
    }
}
