//! Read-your-writes across servers. Every answer to a change carries `Strata-Sequence`: the
//! newest sequence number the store showed once the change was made, so at least the change's
//! own. A read given `min_seq` waits until this store shows that sequence, at most
//! `Limits::min_seq_wait`: on a replica the wait asks it to catch up at once, and one that
//! cannot answers 503; on the writer every write is already visible, so a sequence past its
//! newest is a 422 (no write has it: the request is well formed, the store cannot answer it).

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;

use std::time::Duration;

use strata_engine::ErrorKind;

use crate::problem::Problem;
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

/// Waits until the store shows `min_seq` (when given), within the server's bound. On the async
/// worker: each step asks the replica for a round without waiting (`wait_for_sequence` with no
/// time) and sleeps a little, so waiting readers hold no thread.
pub(crate) async fn at_least(state: &AppState, min_seq: Option<u64>) -> Result<(), Problem> {
    let Some(seq) = min_seq else {
        return Ok(());
    };
    let db = &state.inner.db;
    let deadline = tokio::time::Instant::now() + state.inner.limits.min_seq_wait;
    loop {
        if db.latest_sequence() >= seq {
            return Ok(());
        }
        match db.wait_for_sequence(seq, Duration::ZERO) {
            Ok(_) => return Ok(()),
            // Not there yet: asked; the answer comes with a later round.
            Err(e) if e.kind() == ErrorKind::Unavailable => {
                if tokio::time::Instant::now() >= deadline {
                    return Err(Problem::from(e));
                }
            }
            // A store that is no replica shows every write it made: no write has this
            // sequence. The request is well formed, so 422, not 400.
            Err(e) if e.kind() == ErrorKind::InvalidArgument => {
                return Err(Problem::unprocessable(e.to_string()));
            }
            Err(e) => return Err(Problem::from(e)),
        }
        tokio::time::sleep(STEP).await;
    }
}

/// How often a waiting read looks again.
const STEP: Duration = Duration::from_millis(5);
