//! Every error answer is a problem document, and every operation documents the errors any
//! request to it can meet: one place, so that no route's annotations forget one and clients
//! generated from the document know every error (doc/architecture.md, the REST door).
//!
//! - A response of status 400 or above is `application/problem+json` with the `Problem` schema.
//! - Every operation: 500 (a damaged file or an I/O error), 503 (the store closing, writes
//!   stopped by a background error, the bucket unreachable); every one that asks for a token,
//!   401 (none, or a wrong one).
//! - Every operation that takes parameters or a body: 400 (input its schema allows but the
//!   store refuses). With a body: 413 (over the body limit). With a column family to name: 404.
//! - Every operation that writes (not GET or HEAD): 403 (a read-only store, or a cookie from
//!   another origin), 409 (a newer writer took a bucket store over), 507 (the disk is full).
//! - The parameters every route shares carry the rules the server enforces for them, whatever
//!   the route (`constrained`): what the schema allows, the server takes.

use utoipa::openapi::path::{HttpMethod, Operation, ParameterIn};
use utoipa::openapi::schema::{
    AdditionalProperties, KnownFormat, ObjectBuilder, OneOfBuilder, SchemaFormat, Type,
};
use utoipa::openapi::{Content, OpenApi, Ref, RefOr, Response, Schema};

use super::encodings_doc::{BASE64URL, PATH_KEY};
use super::upload::MAX_PATCH_OFFSET;
use crate::codec::PAGE_TOKEN_MIN_CHARS;

pub(crate) struct Problems;

const PROBLEM_JSON: &str = "application/problem+json";

/// The statuses every operation of `method` may answer, with what each means.
fn common(method: &HttpMethod, op: &Operation) -> Vec<(u16, &'static str)> {
    let mut out = vec![
        (500, "a damaged file or an I/O error"),
        (
            503,
            "the store is closing, writes are stopped, or its bucket is unreachable",
        ),
    ];
    if op.security.is_some() {
        out.push((401, "no token, or a wrong one"));
    }
    let has_input = op.parameters.as_ref().is_some_and(|p| !p.is_empty());
    if has_input || op.request_body.is_some() {
        out.push((400, "input the store refuses"));
    }
    if op.request_body.is_some() {
        out.push((413, "the body is over its limit"));
        out.push((415, "a body of a media type the route does not take"));
    }
    let names_cf = op.parameters.iter().flatten().any(|p| match p {
        RefOr::T(p) => p.name == "cf",
        RefOr::Ref(_) => false,
    });
    if names_cf || op.request_body.is_some() {
        out.push((404, "no such column family (or key)"));
    }
    if !matches!(method, HttpMethod::Get | HttpMethod::Head) {
        out.push((
            403,
            "the store is served read-only, or the request's origin is not the server's",
        ));
        out.push((409, "another writer took the store over"));
        out.push((507, "the disk is full"));
    }
    out
}

/// The schema the server enforces for a shared parameter, by where it is and its name.
fn constrained(place: &ParameterIn, name: &str) -> Option<Schema> {
    let text = || ObjectBuilder::new().schema_type(Type::String);
    let schema = match (place, name) {
        (ParameterIn::Path, "key") => text().min_length(Some(2)).pattern(Some(PATH_KEY)),
        (ParameterIn::Query, "cf") => text().min_length(Some(1)).max_length(Some(1024)),
        (ParameterIn::Query, "raw" | "reverse" | "keys_only") => {
            text().enum_values(Some(["0", "1", "true", "false"]))
        }
        (ParameterIn::Query, "page_token") => text()
            .min_length(Some(PAGE_TOKEN_MIN_CHARS))
            .pattern(Some(BASE64URL)),
        (ParameterIn::Query, "offset") => {
            let at = ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0))
                .maximum(Some(MAX_PATCH_OFFSET));
            let end = text().enum_values(Some(["end"]));
            return Some(Schema::OneOf(
                OneOfBuilder::new().item(at).item(end).build(),
            ));
        }
        (ParameterIn::Query, "sync") => {
            text().enum_values(Some(["0", "1", "true", "false", "local", "bucket"]))
        }
        (ParameterIn::Query, "encoding") => text().enum_values(Some(["base64", "utf8"])),
        (ParameterIn::Query, "limit") => ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .minimum(Some(1)),
        (ParameterIn::Query, "after") | (ParameterIn::Header, "Last-Event-ID") => {
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
                .minimum(Some(0))
        }
        (ParameterIn::Query, "ttl") => ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(1))
            .maximum(Some(u32::MAX)),
        _ => return None,
    };
    Some(Schema::Object(schema.build()))
}

fn problem_content() -> RefOr<Content> {
    RefOr::T(Content::new(Some(Ref::from_schema_name("Problem"))))
}

/// Tagged enums whose Rust type denies unknown fields: utoipa closes structs so, not the
/// objects of an enum's variants.
const CLOSED_ENUMS: &[&str] = &["BatchOp"];

fn close_variants(openapi: &mut OpenApi) {
    let Some(components) = openapi.components.as_mut() else {
        return;
    };
    for name in CLOSED_ENUMS {
        if let Some(RefOr::T(Schema::OneOf(one))) = components.schemas.get_mut(*name) {
            for variant in &mut one.items {
                if let RefOr::T(Schema::Object(o)) = variant {
                    o.additional_properties = Some(Box::new(AdditionalProperties::FreeForm(false)));
                }
            }
        }
    }
}

impl utoipa::Modify for Problems {
    fn modify(&self, openapi: &mut OpenApi) {
        close_variants(openapi);
        for item in openapi.paths.paths.values_mut() {
            let ops = [
                (HttpMethod::Get, &mut item.get),
                (HttpMethod::Put, &mut item.put),
                (HttpMethod::Post, &mut item.post),
                (HttpMethod::Delete, &mut item.delete),
                (HttpMethod::Head, &mut item.head),
                (HttpMethod::Patch, &mut item.patch),
            ];
            for (method, op) in ops {
                let Some(op) = op else { continue };
                for param in op.parameters.iter_mut().flatten() {
                    if let RefOr::T(param) = param
                        && let Some(schema) = constrained(&param.parameter_in, &param.name)
                    {
                        // The description stays where the route wrote it.
                        let description = match &param.schema {
                            Some(RefOr::T(Schema::Object(o))) => o.description.clone(),
                            _ => None,
                        };
                        let mut schema = schema;
                        if let Schema::Object(o) = &mut schema {
                            o.description = description;
                        }
                        param.schema = Some(RefOr::T(schema));
                    }
                }
                for (status, description) in common(&method, op) {
                    op.responses
                        .responses
                        .entry(status.to_string())
                        .or_insert_with(|| RefOr::T(Response::new(description)));
                }
                for (status, response) in op.responses.responses.iter_mut() {
                    let is_error = status.parse::<u16>().is_ok_and(|s| s >= 400);
                    let RefOr::T(response) = response else {
                        continue;
                    };
                    if response.description.is_empty() {
                        let reason = status.parse::<u16>().ok().and_then(|s| {
                            axum::http::StatusCode::from_u16(s).ok()?.canonical_reason()
                        });
                        response.description = reason.unwrap_or("an answer").to_lowercase();
                    }
                    if is_error && method != HttpMethod::Head {
                        response.content.clear();
                        response
                            .content
                            .insert(PROBLEM_JSON.to_string(), problem_content());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use utoipa::OpenApi;

    /// The committed document's operations as JSON: (method, path, operation).
    fn operations() -> Vec<(String, String, serde_json::Value)> {
        let doc = serde_json::to_value(super::super::openapi::ApiDoc::openapi()).unwrap();
        let mut out = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                out.push((method.clone(), path.clone(), op.clone()));
            }
        }
        out
    }

    #[test]
    fn every_error_is_a_problem_document_and_every_operation_names_the_common_ones() {
        for (method, path, op) in operations() {
            let responses = op["responses"].as_object().unwrap();
            for (status, response) in responses {
                assert!(
                    !response["description"].as_str().unwrap().is_empty(),
                    "{path}"
                );
                if status.parse::<u16>().unwrap() >= 400 && method != "head" {
                    let types: Vec<&String> =
                        response["content"].as_object().unwrap().keys().collect();
                    assert_eq!(
                        types,
                        ["application/problem+json"],
                        "{method} {path} {status}"
                    );
                }
            }
            let has = |s: &str| responses.contains_key(s);
            assert!(has("500") && has("503"), "{method} {path}");
            if op.get("security").is_some() {
                assert!(has("401"), "{method} {path}");
            }
            if method != "get" && method != "head" {
                assert!(has("403") && has("409") && has("507"), "{method} {path}");
            }
        }
    }

    #[test]
    fn shared_parameters_carry_the_servers_rules() {
        let param = |method: &str, path: &str, name: &str| {
            let (_, _, op) = operations()
                .into_iter()
                .find(|(m, p, _)| m == method && p == path)
                .unwrap();
            op["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == name)
                .unwrap()["schema"]
                .clone()
        };
        let key = "/api/v1/kv/{key}";
        assert_eq!(param("put", key, "cf")["minLength"], 1);
        assert_eq!(param("put", key, "ttl")["minimum"], 1);
        assert_eq!(
            param("get", key, "raw")["enum"],
            serde_json::json!(["0", "1", "true", "false"])
        );
        let offset = param("patch", key, "offset");
        assert_eq!(offset["oneOf"][0]["maximum"], super::MAX_PATCH_OFFSET);
        assert_eq!(offset["oneOf"][1]["enum"], serde_json::json!(["end"]));
        assert_eq!(
            param("get", "/api/v1/kv", "page_token")["minLength"],
            crate::codec::PAGE_TOKEN_MIN_CHARS
        );
    }
}
