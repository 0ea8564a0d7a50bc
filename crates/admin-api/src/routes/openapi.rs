//! The OpenAPI document, built from the handlers' annotations; committed as `openapi.json` at the
//! crate's root (a test fails when it drifts), served at `/api/openapi.json` and `/api/docs`.

use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::problems_doc::Problems;
use super::{admin, backups, batch, cfs, inspect, kv, scan, upload};

#[derive(Debug, OpenApi)]
#[openapi(
    info(title = "Strata admin API", description = "Data, admin and observability routes over one open Strata store. Keys in paths are base64url; keys and values in JSON are base64, or text with encoding=utf8. Errors are application/problem+json."),
    paths(
        kv::get, kv::head, kv::put, upload::patch, kv::delete,
        batch::batch_get, batch::batch_write,
        scan::scan, scan::list, scan::delete_range,
        cfs::list, cfs::create, cfs::detail, cfs::drop,
        admin::server, admin::flush, admin::compact_range, admin::stats, admin::healthz, admin::verify,
        backups::create_backup, backups::list_backups,
        inspect::lsm, inspect::files, inspect::tombstones, inspect::blobs, inspect::cache,
        crate::metrics::metrics, crate::events::events, crate::auth::session,
    ),
    components(schemas(
        crate::problem::Problem, crate::codec::BatchOp, crate::codec::Encoding, crate::events::Event,
        strata_engine::FlushInfo, strata_engine::CompactionInfo, strata_engine::BlobGcInfo,
        strata_engine::BlobFilesDeletedInfo, strata_engine::StallCause,
    )),
    modifiers(&Security, &Problems),
    tags(
        (name = "kv", description = "keys and values"),
        (name = "cfs", description = "column families"),
        (name = "admin", description = "maintenance and sign-in"),
        (name = "observe", description = "what the store looks like now"),
    )
)]
pub struct ApiDoc;

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        components.add_security_scheme(
            "cookie",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::new(
                crate::auth::SESSION_COOKIE,
            ))),
        );
    }
}

/// The document as committed: pretty JSON with a final newline, with the rules that span
/// fields (`encodings_doc`) written in.
pub fn document() -> String {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    super::encodings_doc::apply(&mut doc);
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}
