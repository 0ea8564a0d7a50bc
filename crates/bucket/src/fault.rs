//! Faults between the engine and the bucket, for tests: requests refused before they reach the
//! server, answers lost after the server acted (a retried create-only PUT then finds its own
//! object), slow answers, an unreachable server, and a server that ignores conditional writes.
//! The real server still does every request that is not refused.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};
use parking_lot::Mutex;

/// Which requests a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    Put,
    Get,
    List,
    Delete,
}

/// What happens to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// It fails before it reaches the server.
    Refuse,
    /// The server does it, but the answer is lost: the caller sees a failure.
    LoseAnswer,
    /// The answer comes this much later.
    Delay(Duration),
}

#[derive(Debug)]
struct Rule {
    request: Request,
    key_contains: String,
    fault: Fault,
    remaining: usize,
}

#[derive(Debug, Default)]
struct Plan {
    rules: Vec<Rule>,
    unreachable: bool,
    ignore_conditions: bool,
    injected: u64,
}

/// The faults to inject, changed while the store runs.
#[derive(Debug, Default)]
pub struct FaultPlan {
    plan: Mutex<Plan>,
}

impl FaultPlan {
    pub fn new() -> Arc<FaultPlan> {
        Arc::new(FaultPlan::default())
    }

    /// The next `times` requests of kind `request` whose key contains `key_contains` get `fault`.
    pub fn inject(&self, request: Request, key_contains: &str, fault: Fault, times: usize) {
        self.plan.lock().rules.push(Rule {
            request,
            key_contains: key_contains.to_string(),
            fault,
            remaining: times,
        });
    }

    /// While set, every request is refused, as by a server that is down.
    pub fn set_unreachable(&self, unreachable: bool) {
        self.plan.lock().unreachable = unreachable;
    }

    /// While set, create-only PUTs overwrite, as on a server that ignores `If-None-Match`.
    pub fn ignore_conditions(&self, ignore: bool) {
        self.plan.lock().ignore_conditions = ignore;
    }

    /// How many faults were injected so far.
    pub fn injected(&self) -> u64 {
        self.plan.lock().injected
    }

    fn take(&self, request: Request, key: &str) -> Option<Fault> {
        let mut plan = self.plan.lock();
        if plan.unreachable {
            plan.injected += 1;
            return Some(Fault::Refuse);
        }
        let rule = plan.rules.iter_mut().find(|r| {
            r.remaining > 0 && r.request == request && key.contains(r.key_contains.as_str())
        })?;
        rule.remaining -= 1;
        let fault = rule.fault;
        plan.injected += 1;
        Some(fault)
    }
}

fn injected(what: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "fault injection",
        source: format!("injected fault: {what}").into(),
    }
}

/// An object store with `plan`'s faults in front of `inner`.
pub(crate) struct FaultyStore {
    pub(crate) inner: Arc<dyn ObjectStore>,
    pub(crate) plan: Arc<FaultPlan>,
}

impl fmt::Debug for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

/// A LIST with `fault` applied: refused, or started late (the listing is lazy, so the server
/// answers as of after the delay).
fn faulty_list(
    fault: Option<Fault>,
    inner: BoxStream<'static, object_store::Result<ObjectMeta>>,
) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
    match fault {
        None => inner,
        Some(Fault::Delay(d)) => futures_util::stream::once(async move {
            tokio::time::sleep(d).await;
            inner
        })
        .flatten()
        .boxed(),
        Some(Fault::Refuse | Fault::LoseAnswer) => {
            futures_util::stream::once(async { Err(injected("LIST refused")) }).boxed()
        }
    }
}

impl FaultyStore {
    /// Applies the fault before the request; `Some(lose)` goes on with the request, `lose`
    /// saying whether its answer is then lost.
    async fn before(&self, request: Request, key: &Path) -> object_store::Result<bool> {
        match self.plan.take(request, key.as_ref()) {
            None => Ok(false),
            Some(Fault::Refuse) => Err(injected("request refused")),
            Some(Fault::LoseAnswer) => Ok(true),
            Some(Fault::Delay(d)) => {
                tokio::time::sleep(d).await;
                Ok(false)
            }
        }
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        mut opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let lose = self.before(Request::Put, location).await?;
        if self.plan.plan.lock().ignore_conditions && opts.mode == PutMode::Create {
            opts.mode = PutMode::Overwrite;
        }
        let result = self.inner.put_opts(location, payload, opts).await?;
        if lose {
            return Err(injected("the answer to a PUT that succeeded was lost"));
        }
        Ok(result)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.before(Request::Put, location).await?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let lose = self.before(Request::Get, location).await?;
        let result = self.inner.get_opts(location, options).await?;
        if lose {
            return Err(injected("the answer to a GET was lost"));
        }
        Ok(result)
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.before(Request::Get, location).await?;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        if self.plan.take(Request::Delete, "").is_some() {
            return futures_util::stream::once(async { Err(injected("DELETE refused")) }).boxed();
        }
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let key = prefix.map(|p| p.to_string()).unwrap_or_default();
        let fault = self.plan.take(Request::List, &key);
        faulty_list(fault, self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let key = prefix.map(|p| p.to_string()).unwrap_or_default();
        let fault = self.plan.take(Request::List, &key);
        faulty_list(fault, self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let key = prefix.map(|p| p.to_string()).unwrap_or_default();
        if self.plan.take(Request::List, &key).is_some() {
            return Err(injected("LIST refused"));
        }
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.before(Request::Put, to).await?;
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.before(Request::Put, to).await?;
        self.inner.rename_opts(from, to, options).await
    }
}
