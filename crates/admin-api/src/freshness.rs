//! Read-your-writes across servers. Every answer to a write of data (PUT, PATCH, DELETE,
//! batchWrite, deleteRange) carries `Strata-Sequence`: the sequence number that write committed
//! at, its own and no other writer's; an empty batch carries none. A reader that shows it shows
//! the write. A read given `min_seq` waits until this store shows that sequence, at most
//! `Limits::min_seq_wait`: on a replica the wait asks it to catch up at once, and one that
//! cannot answers 503; on the writer every write is already visible, so a sequence past its
//! newest is a 422 (no write has it: the request is well formed, the store cannot answer it).

use axum::http::HeaderValue;
use axum::response::{IntoResponseParts, ResponseParts};

use std::convert::Infallible;
use std::time::Duration;

use strata_engine::{Error, ErrorKind};

use crate::problem::Problem;
use crate::state::AppState;

/// The response header naming the sequence a change is visible at.
pub const SEQUENCE_HEADER: &str = "strata-sequence";

/// The sequence number a write committed at (`Db::write_sequenced`): answered as
/// `Strata-Sequence`. Only a handler that wrote holds one, so reads (POST ones too) and changes
/// that write no data answer none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CommittedAt(pub u64);

impl CommittedAt {
    /// What a write committed at `seq` answers: that sequence, unless its batch was `empty`
    /// (no sequence is then its own: the store's newest would be another writer's).
    pub(crate) fn of_write(empty: bool, seq: u64) -> Option<CommittedAt> {
        (!empty).then_some(CommittedAt(seq))
    }
}

impl IntoResponseParts for CommittedAt {
    type Error = Infallible;

    fn into_response_parts(self, mut res: ResponseParts) -> Result<ResponseParts, Infallible> {
        res.headers_mut()
            .insert(SEQUENCE_HEADER, HeaderValue::from(self.0));
        Ok(res)
    }
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
    // A mount over a replica shows a sequence once its caches were dropped for it, a moment
    // after the store does (`ReplicaInvalidation`).
    let mount_shows = || {
        state
            .inner
            .mount
            .as_ref()
            .and_then(|m| m.replica.as_ref())
            .is_none_or(|r| r.shows(seq))
    };
    loop {
        let store_shows = match db.latest_sequence() >= seq {
            true => Ok(()),
            false => db.wait_for_sequence(seq, Duration::ZERO).map(|_| ()),
        };
        let late = match store_shows {
            Ok(()) if mount_shows() => return Ok(()),
            Ok(()) => Error::Unavailable(format!(
                "the mount has not yet dropped what it cached from before sequence {seq}"
            )),
            // Not there yet: asked; the answer comes with a later round.
            Err(e) if e.kind() == ErrorKind::Unavailable => e,
            // A store that is no replica shows every write it made: no write has this
            // sequence. The request is well formed, so 422, not 400.
            Err(e) if e.kind() == ErrorKind::InvalidArgument => {
                return Err(Problem::unprocessable(e.to_string()));
            }
            Err(e) => return Err(Problem::from(e)),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(Problem::from(late));
        }
        tokio::time::sleep(STEP).await;
    }
}

/// How often a waiting read looks again.
const STEP: Duration = Duration::from_millis(5);
