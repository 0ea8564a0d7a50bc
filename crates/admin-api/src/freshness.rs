//! Read-your-writes across servers. Every answer to a change carries `Strata-Sequence`: the
//! newest sequence number the store showed once the change was made, so at least the change's
//! own. A read given `min_seq` waits until this store shows that sequence, at most
//! `Limits::min_seq_wait`: on a replica the wait asks it to catch up at once, and one that
//! cannot answers 503; on the writer every write is already visible, so a sequence past its
//! newest is a 400 (no write has it).

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;

use crate::problem::Problem;
use crate::routes::blocking;
use crate::state::AppState;

/// The response header naming the sequence a change is visible at.
pub const SEQUENCE_HEADER: &str = "strata-sequence";

/// Stamps every successful answer to a change with the store's newest sequence.
pub(crate) async fn stamp(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let changes = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let mut res = next.run(req).await;
    if changes && res.status().is_success() {
        let seq = state.inner.db.latest_sequence();
        res.headers_mut()
            .insert(SEQUENCE_HEADER, HeaderValue::from(seq));
    }
    res
}

/// Waits until the store shows `min_seq` (when given), within the server's bound.
pub(crate) async fn at_least(state: &AppState, min_seq: Option<u64>) -> Result<(), Problem> {
    let Some(seq) = min_seq else {
        return Ok(());
    };
    if state.inner.db.latest_sequence() >= seq {
        return Ok(());
    }
    let wait = state.inner.limits.min_seq_wait;
    blocking(state, move |s| {
        s.db.wait_for_sequence(seq, wait)?;
        Ok(())
    })
    .await
}
