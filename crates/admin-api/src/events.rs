//! The engine's events as a Server-Sent Events feed: [`EventHub`] is the engine's listener, keeps
//! the last events for clients that reconnect (`Last-Event-ID`), and fans them out; each client
//! also gets a stats sample every second (without an id: samples are not replayed).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{Value, json};
use strata_engine::{
    BlobFilesDeletedInfo, BlobGcInfo, CompactionInfo, EventListener, FlushInfo, StallCause,
};
use tokio::sync::broadcast;

use crate::problem::Problem;
use crate::state::AppState;

/// Events kept for clients that reconnect.
const KEPT: usize = 1024;

/// One engine event. `kind` names the payload in `data`: `flush` a `FlushInfo`, `compaction` and
/// `compaction_begin` a `CompactionInfo`, `blob_gc` a `BlobGcInfo`, `blob_files_deleted` a
/// `BlobFilesDeletedInfo`, `stall_begin` and `stall_end` a `StallCause` (`cause`, with `waited_ms`
/// at the end), `flush_begin` the `column_family`, `background_error` the `error`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Event {
    pub id: u64,
    pub kind: &'static str,
    #[schema(value_type = Object)]
    pub data: Value,
}

/// The engine's listener and the feed's source. Put it in `Options::listeners` before opening.
#[derive(Debug)]
pub struct EventHub {
    tx: broadcast::Sender<Event>,
    recent: Mutex<(u64, VecDeque<Event>)>,
}

impl Default for EventHub {
    fn default() -> Self {
        EventHub {
            tx: broadcast::channel(KEPT).0,
            recent: Mutex::new((0, VecDeque::new())),
        }
    }
}

impl EventHub {
    fn publish(&self, kind: &'static str, data: Value) {
        let event = {
            let mut r = self.recent.lock();
            r.0 += 1;
            let e = Event {
                id: r.0,
                kind,
                data,
            };
            if r.1.len() == KEPT {
                r.1.pop_front();
            }
            r.1.push_back(e.clone());
            e
        };
        // No subscriber is fine: the event is kept for the next one.
        let _ = self.tx.send(event);
    }

    /// The id of the newest event (0: none yet).
    fn newest(&self) -> u64 {
        self.recent.lock().0
    }

    /// Events after `after`, oldest first, and a receiver for the ones to come.
    fn subscribe(&self, after: u64) -> (Vec<Event>, broadcast::Receiver<Event>) {
        let r = self.recent.lock();
        let rx = self.tx.subscribe();
        let missed = r.1.iter().filter(|e| e.id > after).cloned().collect();
        (missed, rx)
    }
}

fn to_json(v: impl Serialize) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

impl EventListener for EventHub {
    fn on_flush_begin(&self, column_family: &str) {
        self.publish("flush_begin", json!({ "column_family": column_family }));
    }
    fn on_flush_completed(&self, info: &FlushInfo) {
        self.publish("flush", to_json(info));
    }
    fn on_compaction_begin(&self, info: &CompactionInfo) {
        self.publish("compaction_begin", to_json(info));
    }
    fn on_compaction_completed(&self, info: &CompactionInfo) {
        self.publish("compaction", to_json(info));
    }
    fn on_stall_begin(&self, cause: StallCause) {
        self.publish("stall_begin", json!({ "cause": cause }));
    }
    fn on_stall_end(&self, cause: StallCause, waited: Duration) {
        self.publish(
            "stall_end",
            json!({ "cause": cause, "waited_ms": waited.as_millis() as u64 }),
        );
    }
    fn on_background_error(&self, error: &str) {
        self.publish("background_error", json!({ "error": error }));
    }
    fn on_blob_gc(&self, info: &BlobGcInfo) {
        self.publish("blob_gc", to_json(info));
    }
    fn on_blob_files_deleted(&self, info: &BlobFilesDeletedInfo) {
        self.publish("blob_files_deleted", to_json(info));
    }
}

struct Feed {
    shutdown: tokio::sync::watch::Receiver<bool>,
    replay: VecDeque<Event>,
    rx: broadcast::Receiver<Event>,
    tick: tokio::time::Interval,
    last: u64,
    state: AppState,
}

fn sse(e: &Event) -> SseEvent {
    SseEvent::default()
        .id(e.id.to_string())
        .event(e.kind)
        .data(e.data.to_string())
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventsQuery {
    #[serde(default, deserialize_with = "after_id")]
    after: Option<u64>,
}

fn after_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let s = <String as serde::Deserialize>::deserialize(d)?;
    crate::codec::parse_int64(&s)
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom(format!("after {s:?} is not an event id")))
}

#[utoipa::path(get, path = "/api/v1/events", tag = "observe", params(("Last-Event-ID" = Option<u64>, Header, description = "resume after this event"), ("after" = Option<u64>, Query, description = "start after this event id (0: every kept event); Last-Event-ID wins")), responses((status = 200, description = "Server-Sent Events: flush, compaction, stall, blob GC, deletions, background errors, and a stats sample each second", content_type = "text/event-stream", body = String)), security(("bearer" = []), ("cookie" = [])))]
/// `GET /api/v1/events`.
pub(crate) async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, Problem> {
    let q: EventsQuery = crate::routes::query(&uri)?;
    let hub = state
        .inner
        .events
        .clone()
        .ok_or_else(|| Problem::not_found("this server has no event feed"))?;
    // A new client starts with the events from now on; a returning one gets what it missed.
    let after = match headers.get("last-event-id") {
        None => q.after.unwrap_or_else(|| hub.newest()),
        Some(v) => v
            .to_str()
            .ok()
            // The whitespace around a header's value is not part of it (RFC 9110, 5.5).
            .and_then(|s| crate::codec::parse_int64(s.trim_matches([' ', '\t'])))
            .ok_or_else(|| Problem::bad_request("Last-Event-ID is not an event id"))?,
    };
    let (missed, rx) = hub.subscribe(after);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let feed = Feed {
        shutdown: state.inner.shutdown.clone(),
        last: after,
        replay: missed.into(),
        rx,
        tick,
        state,
    };
    let stream = futures_util::stream::unfold(feed, |mut f| async move {
        loop {
            if let Some(e) = f.replay.pop_front() {
                f.last = e.id;
                return Some((Ok(sse(&e)), f));
            }
            if *f.shutdown.borrow() {
                return None;
            }
            tokio::select! {
                // A feed without a server (no sender) never ends this way.
                _ = async {
                    if f.shutdown.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                } => return None,
                r = f.rx.recv() => match r {
                    Ok(e) if e.id > f.last => {
                        f.last = e.id;
                        return Some((Ok(sse(&e)), f));
                    }
                    Ok(_) => continue,
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        let note = SseEvent::default().event("lagged").data(json!({ "missed": n }).to_string());
                        return Some((Ok(note), f));
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                _ = f.tick.tick() => {
                    let db = f.state.inner.db.clone();
                    let sample = tokio::task::spawn_blocking(move || db.statistics()).await;
                    if let Ok(s) = sample {
                        let e = SseEvent::default().event("stats").data(to_json(s).to_string());
                        return Some((Ok(e), f));
                    }
                }
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
