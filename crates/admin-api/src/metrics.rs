//! `GET /metrics`: the engine's counters and gauges in the OpenMetrics text format, read at each
//! scrape. Names follow RocksDB's tickers with a `strata_` prefix; block-cache hits and misses
//! are one family each, labelled by block type.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::problem::Problem;
use crate::routes::blocking;
use crate::state::AppState;

/// Counters shown as one labelled family instead of one name each.
const CACHE_BY_TYPE: [(&str, &str, &str); 6] = [
    ("block_cache_data_hit", "hit", "data"),
    ("block_cache_data_miss", "miss", "data"),
    ("block_cache_index_hit", "hit", "index"),
    ("block_cache_index_miss", "miss", "index"),
    ("block_cache_filter_hit", "hit", "filter"),
    ("block_cache_filter_miss", "miss", "filter"),
];

#[derive(Debug)]
struct StoreMetrics(Arc<crate::state::Inner>);

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let m = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    ConstCounter::new(value).encode(m)
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> Result<(), std::fmt::Error> {
    let m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(m)
}

impl Collector for StoreMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = serde_json::to_value(self.0.db.statistics()).unwrap_or_default();
        let Some(stats) = stats.as_object() else {
            return Ok(());
        };
        for (name, value) in stats {
            if CACHE_BY_TYPE.iter().any(|(n, _, _)| n == name) {
                continue;
            }
            if let Some(v) = value.as_u64() {
                counter(
                    &mut encoder,
                    &format!("strata_{name}"),
                    &format!("engine counter {name}"),
                    v,
                )?;
            }
        }
        for kind in ["hit", "miss"] {
            let name = format!("strata_block_cache_{kind}");
            let mut m = encoder.encode_descriptor(
                &name,
                &format!("block cache {kind}es by block type"),
                None,
                MetricType::Counter,
            )?;
            for (field, k, block) in CACHE_BY_TYPE {
                if k != kind {
                    continue;
                }
                let v = stats.get(field).and_then(|v| v.as_u64()).unwrap_or(0);
                let labels = [("type", block)];
                ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
            }
        }
        let places = &self.0.places;
        for (name, help, counted) in [
            (
                "strata_api_point_reads",
                "point reads by where they ran: answered from memory on the async worker, or \
                 on the blocking pool for the disk",
                &places.reads,
            ),
            (
                "strata_api_writes",
                "writes (PUT, DELETE, batchWrite) by where they ran: on the async worker with \
                 nothing to wait for, or on the blocking pool",
                &places.writes,
            ),
        ] {
            let mut m = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (place, v) in [("worker", &counted.worker), ("pool", &counted.pool)] {
                let v = v.load(std::sync::atomic::Ordering::Relaxed);
                ConstCounter::new(v).encode(m.encode_family(&[("where", place)])?)?;
            }
        }
        if let Some(st) = self.0.db.storage_stats() {
            encode_storage(&mut encoder, &st)?;
        }
        gauge(
            &mut encoder,
            "strata_latest_sequence",
            "the newest sequence number reads see (a replica's lag in writes is the writer's \
             less its own)",
            i64::try_from(self.0.db.latest_sequence()).unwrap_or(i64::MAX),
        )?;
        if let Some(r) = self.0.db.replica_status() {
            encode_replica(&mut encoder, &r)?;
        }
        let p = self.0.db.properties();
        gauge(
            &mut encoder,
            "strata_total_sst_bytes",
            "bytes of table files",
            p.total_sst_bytes as i64,
        )?;
        gauge(
            &mut encoder,
            "strata_live_bytes",
            "live table and blob bytes",
            p.live_bytes as i64,
        )?;
        gauge(
            &mut encoder,
            "strata_pending_compaction_bytes",
            "bytes compaction must rewrite",
            p.pending_compaction_bytes as i64,
        )?;
        gauge(
            &mut encoder,
            "strata_live_wal_bytes",
            "bytes of live WAL files",
            p.live_wal_bytes as i64,
        )?;
        gauge(
            &mut encoder,
            "strata_live_snapshots",
            "snapshots alive",
            p.live_snapshots as i64,
        )?;
        gauge(
            &mut encoder,
            "strata_held_deletion_bytes",
            "bytes of files no longer needed that a backup keeps on disk",
            p.held_deletion_bytes as i64,
        )?;
        let mut files = encoder.encode_descriptor(
            "strata_level_files",
            "table files per column family and level",
            None,
            MetricType::Gauge,
        )?;
        for cf in &p.column_families {
            for l in &cf.levels {
                let level = l.level.to_string();
                let labels = [("cf", cf.name.as_str()), ("level", level.as_str())];
                ConstGauge::new(l.files as i64).encode(files.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// A replica's lag and rounds.
fn encode_replica(
    encoder: &mut DescriptorEncoder,
    r: &strata_engine::ReplicaStatus,
) -> Result<(), std::fmt::Error> {
    let m = encoder.encode_descriptor(
        "strata_replica_lag_seconds",
        "seconds since the start of the replica's last round that caught up: every write its \
         source held then is visible",
        None,
        MetricType::Gauge,
    )?;
    ConstGauge::new(r.lag_seconds).encode(m)?;
    counter(
        encoder,
        "strata_replica_rounds",
        "rounds that caught up",
        r.rounds,
    )?;
    counter(
        encoder,
        "strata_replica_failures",
        "rounds that failed (the bucket unreachable, say); reads stay where they were",
        r.failures,
    )
}

/// A bucket store's requests (one family, by operation), bytes, cache, queue and epoch.
fn encode_storage(
    encoder: &mut DescriptorEncoder,
    st: &strata_engine::StorageStats,
) -> Result<(), std::fmt::Error> {
    let mut m = encoder.encode_descriptor(
        "strata_bucket_requests",
        "requests to the bucket by operation",
        None,
        MetricType::Counter,
    )?;
    for (op, v) in [
        ("get", st.gets),
        ("put", st.puts),
        ("delete", st.deletes),
        ("list", st.lists),
    ] {
        ConstCounter::new(v).encode(m.encode_family(&[("op", op)])?)?;
    }
    counter(
        encoder,
        "strata_bucket_bytes_up",
        "bytes uploaded",
        st.bytes_up,
    )?;
    counter(
        encoder,
        "strata_bucket_bytes_down",
        "bytes downloaded",
        st.bytes_down,
    )?;
    counter(
        encoder,
        "strata_bucket_cache_hits",
        "opens of a file the local cache held",
        st.cache_hits,
    )?;
    counter(
        encoder,
        "strata_bucket_cache_misses",
        "opens of a file fetched from the bucket first",
        st.cache_misses,
    )?;
    counter(
        encoder,
        "strata_bucket_log_records",
        "records this writer added to the store's log",
        st.log_records,
    )?;
    gauge(
        encoder,
        "strata_bucket_cache_bytes",
        "bytes of the store's files in the local cache",
        st.cache_bytes as i64,
    )?;
    gauge(
        encoder,
        "strata_bucket_upload_queue",
        "changes waiting for the next log record",
        st.upload_queue as i64,
    )?;
    gauge(
        encoder,
        "strata_bucket_reader_lease_lapsed",
        "1 when this reader's lease lapsed (garbage collection may delete what it reads)",
        i64::from(st.reader_lease_lapsed),
    )?;
    gauge(
        encoder,
        "strata_bucket_writer_epoch",
        "this writer's epoch (0 when opened to read)",
        st.writer_epoch as i64,
    )
}

#[utoipa::path(get, path = "/metrics", tag = "observe", responses((status = 200, description = "OpenMetrics text", content_type = "application/openmetrics-text", body = String)), security(("bearer" = []), ("cookie" = [])))]
/// `GET /metrics`.
pub(crate) async fn metrics(State(state): State<AppState>) -> Result<Response, Problem> {
    let inner = state.inner.clone();
    let text = blocking(&state, move |_| {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(StoreMetrics(inner)));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).map_err(|e| {
            Problem::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        })?;
        Ok(out)
    })
    .await?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response())
}
