//! The conformance check: a server that ignores `If-None-Match: *` would let two writers both
//! win a claim and corrupt the store silently, so a writer refuses to open on one.

use bytes::Bytes;
use strata_engine::{Error, Result};

use crate::client::{Client, Created};

/// PUTs a probe object create-only twice: the first must land, the second must be refused.
/// `who` makes the probe's name this process's own.
pub fn check(client: &Client, who: &str) -> Result<()> {
    let key = format!("probe/{who}");
    // The name is this process's: `first` there already is this PUT's own earlier try (a retry
    // after an answer was lost), not a refusal.
    let first = match try_again_if_unanswered(|| {
        client.put_create_or_own(&key, Bytes::from_static(b"first"))
    })? {
        true => Created::Yes,
        false => Created::AlreadyThere,
    };
    let second = client.put_create(&key, Bytes::from_static(b"second"));
    let kept = client.get(&key);
    let _ = client.delete(&key);
    let faulty = |what: &str| {
        Err(Error::NotSupported(format!(
            "{}: the server {what}: it does not honour conditional writes (If-None-Match: *), \
             so two writers could both commit; refusing to open the store for writing",
            client.url()
        )))
    };
    if first != Created::Yes {
        return faulty("refused a create-only PUT of a new object");
    }
    match second? {
        Created::AlreadyThere => {}
        Created::Yes => return faulty("accepted a create-only PUT over an existing object"),
    }
    if kept?.as_deref() != Some(b"first".as_slice()) {
        return faulty("replaced an object a create-only PUT was refused for");
    }
    Ok(())
}

/// The probe's PUT, tried up to three times while the bucket does not answer (the open's other
/// requests wait out an outage; the probe must not turn one into a verdict on the server).
fn try_again_if_unanswered<T>(mut call: impl FnMut() -> Result<T>) -> Result<T> {
    let mut tries = 0;
    loop {
        match call() {
            Err(Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::Other && tries < 2 =>
            {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(200 << tries));
            }
            other => return other,
        }
    }
}
