//! `agentd.v1.ThreadService`: checks requests, hands them to [`crate::memory::threads`] and the
//! working-memory rules, converts the outcome back. Every method names a resource, checked
//! against the caller's tenant; the store's ownership check keeps a tenant from another
//! resource's thread named by id (PERMISSION_DENIED).

use std::sync::Arc;

use bytes::Bytes;
use tonic::{Request, Response, Status};

use super::error::Violations;
use super::scope::{check_resource, identity};
use super::{check_id, check_text};
use crate::agent::Agents;
use crate::agent::message::Message;
use crate::agent::wire::{message as message_to_pb, timestamp};
use crate::config::Limits;
use crate::json::{from_proto_struct, to_proto_struct};
use crate::memory::threads::{ThreadError, ThreadSummary, Threads};
use crate::memory::working::{Scope, Settings};
use crate::memory::working_store;
use crate::pb;
use crate::store::{Cas, Store, ThreadKey, ThreadOrder};

/// Page sizes: (default, most) for threads and for messages.
const THREAD_PAGE: (usize, usize) = (20, 100);
const MESSAGE_PAGE: (usize, usize) = (50, 200);
/// Most compare-and-set attempts of one unconditional working-memory write.
const MAX_WRITE_ATTEMPTS: usize = 16;
/// Most message ids one DeleteMessages names.
const MAX_DELETE_IDS: usize = 1000;

/// The ThreadService implementation.
pub struct ThreadApi {
    threads: Threads,
    store: Arc<dyn Store>,
    agents: Arc<Agents>,
    limits: Limits,
}

impl ThreadApi {
    /// A ThreadService over `store`; `agents` supply working-memory settings.
    pub fn new(store: Arc<dyn Store>, agents: Arc<Agents>, limits: Limits) -> Self {
        Self {
            threads: Threads::new(store.clone()),
            store,
            agents,
            limits,
        }
    }

    /// The key working memory is read and written through, its thread's ownership checked
    /// when one is named (thread scope checks it in the store call itself).
    async fn working_key(
        &self,
        resource_id: &str,
        thread_id: &str,
        scope: Scope,
    ) -> Result<ThreadKey, Status> {
        let key = ThreadKey {
            thread_id: thread_id.to_owned(),
            resource_id: resource_id.to_owned(),
        };
        if scope == Scope::Resource && !thread_id.is_empty() {
            self.store.get_thread(&key).await?;
        }
        Ok(key)
    }
}

/// A page size: 0 means the default; beyond the most is a violation.
pub(crate) fn page_size(
    v: &mut Violations,
    field: &str,
    asked: i32,
    (default, most): (usize, usize),
) -> usize {
    match usize::try_from(asked) {
        Ok(0) => default,
        Ok(n) if n <= most => n,
        _ => {
            v.add(
                field,
                format!("must be between 0 (default {default}) and {most}"),
            );
            default
        }
    }
}

/// Both ids required and well-formed.
fn key(v: &mut Violations, thread_id: &str, resource_id: &str, limits: &Limits) -> ThreadKey {
    required_id(v, "thread_id", thread_id, limits);
    required_id(v, "resource_id", resource_id, limits);
    ThreadKey {
        thread_id: thread_id.to_owned(),
        resource_id: resource_id.to_owned(),
    }
}

/// A required, well-formed id.
pub(crate) fn required_id(v: &mut Violations, field: &str, value: &str, limits: &Limits) {
    if value.is_empty() {
        v.add(field, "is required");
    } else {
        check_id(v, field, value, limits);
    }
}

/// The working memory a request names: its scope and the agent's settings (if any).
fn working_target(
    v: &mut Violations,
    (limits, agents): (&Limits, &Agents),
    resource_id: &str,
    thread_id: &str,
    scope: i32,
    agent_id: &str,
) -> (Scope, Option<Settings>) {
    required_id(v, "resource_id", resource_id, limits);
    let settings = if agent_id.is_empty() {
        None
    } else {
        match agents.get(agent_id) {
            None => {
                v.add("agent_id", format!("unknown agent {agent_id:?}"));
                None
            }
            Some(agent) => {
                let settings = agent.working_memory();
                if settings.is_none() {
                    v.add(
                        "agent_id",
                        format!("agent {agent_id:?} has no working memory"),
                    );
                }
                settings
            }
        }
    };
    let scope = match pb::WorkingMemoryScope::try_from(scope) {
        Ok(pb::WorkingMemoryScope::Resource) => Scope::Resource,
        Ok(pb::WorkingMemoryScope::Thread) => Scope::Thread,
        Ok(pb::WorkingMemoryScope::Unspecified) => {
            settings.as_ref().map_or(Scope::Resource, |s| s.scope)
        }
        Err(_) => {
            v.add("scope", format!("unknown WorkingMemoryScope {scope}"));
            Scope::Resource
        }
    };
    if scope == Scope::Thread {
        required_id(v, "thread_id", thread_id, limits);
    } else if !thread_id.is_empty() {
        check_id(v, "thread_id", thread_id, limits);
    }
    (scope, settings)
}

/// A ListThreadsRequest, checked: its page size and order.
pub(crate) fn list_threads_request(
    r: &pb::ListThreadsRequest,
    limits: &Limits,
) -> Result<(usize, ThreadOrder), Status> {
    let mut v = Violations::default();
    required_id(&mut v, "resource_id", &r.resource_id, limits);
    let size = page_size(&mut v, "page_size", r.page_size, THREAD_PAGE);
    let order = match pb::ThreadOrder::try_from(r.order_by) {
        Ok(pb::ThreadOrder::Updated) => ThreadOrder::Updated,
        Ok(_) => ThreadOrder::Created,
        Err(_) => {
            v.add("order_by", format!("unknown ThreadOrder {}", r.order_by));
            ThreadOrder::Created
        }
    };
    v.into_result()?;
    Ok((size, order))
}

/// The thread a GetThread or DeleteThread request names, checked.
pub(crate) fn thread_request(
    thread_id: &str,
    resource_id: &str,
    limits: &Limits,
) -> Result<ThreadKey, Status> {
    let mut v = Violations::default();
    let key = key(&mut v, thread_id, resource_id, limits);
    v.into_result()?;
    Ok(key)
}

/// An UpdateThreadRequest, checked: its thread and the new metadata, if any.
pub(crate) fn update_thread_request(
    r: &pb::UpdateThreadRequest,
    limits: &Limits,
) -> Result<
    (
        ThreadKey,
        Option<serde_json::Map<String, serde_json::Value>>,
    ),
    Status,
> {
    let mut v = Violations::default();
    let key = key(&mut v, &r.thread_id, &r.resource_id, limits);
    if let Some(title) = &r.title {
        check_text(&mut v, "title", title, limits);
    }
    let metadata = r.metadata.as_ref().map(from_proto_struct);
    if let Some(m) = &metadata {
        let size = serde_json::to_vec(m).map_or(usize::MAX, |b| b.len());
        if size > limits.max_text_bytes {
            v.add(
                "metadata",
                format!("must be at most {} bytes as JSON", limits.max_text_bytes),
            );
        }
    }
    if r.title.is_none() && metadata.is_none() {
        v.add("title", "set title and / or metadata");
    }
    v.into_result()?;
    Ok((key, metadata))
}

/// A ListMessagesRequest, checked: its thread and page size.
pub(crate) fn list_messages_request(
    r: &pb::ListMessagesRequest,
    limits: &Limits,
) -> Result<(ThreadKey, usize), Status> {
    let mut v = Violations::default();
    let key = key(&mut v, &r.thread_id, &r.resource_id, limits);
    let size = page_size(&mut v, "page_size", r.page_size, MESSAGE_PAGE);
    v.into_result()?;
    Ok((key, size))
}

/// A DeleteMessagesRequest, checked: its thread.
pub(crate) fn delete_messages_request(
    r: &pb::DeleteMessagesRequest,
    limits: &Limits,
) -> Result<ThreadKey, Status> {
    let mut v = Violations::default();
    let key = key(&mut v, &r.thread_id, &r.resource_id, limits);
    if r.message_ids.is_empty() || r.message_ids.len() > MAX_DELETE_IDS {
        v.add(
            "message_ids",
            format!("must name 1 to {MAX_DELETE_IDS} message ids"),
        );
    }
    for (i, id) in r.message_ids.iter().enumerate() {
        let field = format!("message_ids[{i}]");
        required_id(&mut v, &field, id, limits);
    }
    v.into_result()?;
    Ok(key)
}

/// A GetWorkingMemoryRequest, checked: its scope and the agent's settings (if any).
pub(crate) fn get_working_memory_request(
    r: &pb::GetWorkingMemoryRequest,
    checks: (&Limits, &Agents),
) -> Result<(Scope, Option<Settings>), Status> {
    let mut v = Violations::default();
    let target = working_target(
        &mut v,
        checks,
        &r.resource_id,
        &r.thread_id,
        r.scope,
        &r.agent_id,
    );
    v.into_result()?;
    Ok(target)
}

/// An UpdateWorkingMemoryRequest, checked: its scope and the agent's settings (if any).
pub(crate) fn update_working_memory_request(
    r: &pb::UpdateWorkingMemoryRequest,
    checks: (&Limits, &Agents),
) -> Result<(Scope, Option<Settings>), Status> {
    let mut v = Violations::default();
    let (scope, settings) = working_target(
        &mut v,
        checks,
        &r.resource_id,
        &r.thread_id,
        r.scope,
        &r.agent_id,
    );
    check_text(&mut v, "content", &r.content, checks.0);
    if let Some(settings) = &settings
        && let Err(e) = settings.check_content(&r.content)
    {
        v.add("content", e);
    }
    v.into_result()?;
    Ok((scope, settings))
}

fn thread_to_pb(t: ThreadSummary) -> pb::Thread {
    pb::Thread {
        id: t.info.thread_id,
        resource_id: t.info.resource_id,
        title: t.title,
        metadata: Some(to_proto_struct(&t.metadata)),
        created_at: Some(timestamp(ms(t.info.created_ms))),
        updated_at: Some(timestamp(ms(t.info.updated_ms))),
        message_count: t.info.message_count,
    }
}

fn ms(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn scope_to_pb(scope: Scope) -> i32 {
    match scope {
        Scope::Resource => pb::WorkingMemoryScope::Resource,
        Scope::Thread => pb::WorkingMemoryScope::Thread,
    }
    .into()
}

impl From<ThreadError> for Status {
    fn from(err: ThreadError) -> Self {
        match err {
            ThreadError::Store(e) => e.into(),
            ThreadError::NotFound(_) => Status::not_found(err.to_string()),
            ThreadError::PageToken(e) => {
                let mut v = Violations::default();
                v.add("page_token", e.to_string());
                v.into_status()
            }
            ThreadError::Contended(_) => Status::aborted(err.to_string()),
        }
    }
}

#[tonic::async_trait]
impl pb::thread_service_server::ThreadService for ThreadApi {
    async fn list_threads(
        &self,
        request: Request<pb::ListThreadsRequest>,
    ) -> Result<Response<pb::ListThreadsResponse>, Status> {
        let caller = identity(request.extensions());
        let r = request.into_inner();
        let (size, order) = list_threads_request(&r, &self.limits)?;
        check_resource(&caller, "resource_id", &r.resource_id)?;
        let (threads, next) = self
            .threads
            .list(&r.resource_id, order, &r.page_token, size)
            .await?;
        Ok(Response::new(pb::ListThreadsResponse {
            threads: threads.into_iter().map(thread_to_pb).collect(),
            next_page_token: next,
        }))
    }

    async fn get_thread(
        &self,
        request: Request<pb::GetThreadRequest>,
    ) -> Result<Response<pb::Thread>, Status> {
        let caller = identity(request.extensions());
        let r = request.into_inner();
        let key = thread_request(&r.thread_id, &r.resource_id, &self.limits)?;
        check_resource(&caller, "resource_id", &r.resource_id)?;
        Ok(Response::new(thread_to_pb(self.threads.get(&key).await?)))
    }

    async fn update_thread(
        &self,
        request: Request<pb::UpdateThreadRequest>,
    ) -> Result<Response<pb::Thread>, Status> {
        let caller = identity(request.extensions());
        let r = request.into_inner();
        let (key, metadata) = update_thread_request(&r, &self.limits)?;
        check_resource(&caller, "resource_id", &r.resource_id)?;
        let thread = self.threads.update(&key, r.title, metadata).await?;
        Ok(Response::new(thread_to_pb(thread)))
    }

    async fn delete_thread(
        &self,
        request: Request<pb::DeleteThreadRequest>,
    ) -> Result<Response<pb::DeleteThreadResponse>, Status> {
        let caller = identity(request.extensions());
        let r = request.into_inner();
        let key = thread_request(&r.thread_id, &r.resource_id, &self.limits)?;
        check_resource(&caller, "resource_id", &r.resource_id)?;
        let (deleted, runs) = self.threads.delete(&key).await?;
        Ok(Response::new(pb::DeleteThreadResponse {
            deleted,
            runs_deleted: runs,
        }))
    }

    async fn list_messages(
        &self,
        request: Request<pb::ListMessagesRequest>,
    ) -> Result<Response<pb::ListMessagesResponse>, Status> {
        let caller = identity(request.extensions());
        let r = request.into_inner();
        let (key, size) = list_messages_request(&r, &self.limits)?;
        check_resource(&caller, "resource_id", &r.resource_id)?;
        let (page, next) = self
            .threads
            .messages(&key, &r.page_token, size, r.newest_first)
            .await?;
        let mut out = Vec::with_capacity(page.len());
        for (position, raw) in page {
            match serde_json::from_slice::<Message>(&raw) {
                Ok(m) => out.push(message_to_pb(&m)),
                Err(e) => {
                    tracing::warn!(thread = %key.thread_id, position, error = %e, "skipping an unreadable stored message")
                }
            }
        }
        Ok(Response::new(pb::ListMessagesResponse {
            messages: out,
            next_page_token: next,
        }))
    }

    async fn delete_messages(
        &self,
        request: Request<pb::DeleteMessagesRequest>,
    ) -> Result<Response<pb::DeleteMessagesResponse>, Status> {
        let caller = identity(request.extensions());
        let r = request.into_inner();
        let key = delete_messages_request(&r, &self.limits)?;
        check_resource(&caller, "resource_id", &r.resource_id)?;
        let deleted = self.threads.delete_messages(&key, &r.message_ids).await?;
        Ok(Response::new(pb::DeleteMessagesResponse {
            deleted: u32::try_from(deleted).unwrap_or(u32::MAX),
        }))
    }

    async fn get_working_memory(
        &self,
        request: Request<pb::GetWorkingMemoryRequest>,
    ) -> Result<Response<pb::WorkingMemory>, Status> {
        let caller = identity(request.extensions());
        let r = request.into_inner();
        let (scope, settings) = get_working_memory_request(&r, (&self.limits, &self.agents))?;
        check_resource(&caller, "resource_id", &r.resource_id)?;
        let key = self
            .working_key(&r.resource_id, &r.thread_id, scope)
            .await?;
        let stored = working_store::read(self.store.as_ref(), &key, scope).await?;
        Ok(Response::new(working_to_pb(
            stored,
            scope,
            settings.as_ref(),
        )))
    }

    async fn update_working_memory(
        &self,
        request: Request<pb::UpdateWorkingMemoryRequest>,
    ) -> Result<Response<pb::WorkingMemory>, Status> {
        let caller = identity(request.extensions());
        let r = request.into_inner();
        let (scope, settings) = update_working_memory_request(&r, (&self.limits, &self.agents))?;
        check_resource(&caller, "resource_id", &r.resource_id)?;
        let value = Bytes::from(r.content.clone());
        let key = self
            .working_key(&r.resource_id, &r.thread_id, scope)
            .await?;
        let store = self.store.as_ref();
        // Unset expected_version: always written (read the version, then compare-and-set).
        let mut expected = r.expected_version;
        for _ in 0..MAX_WRITE_ATTEMPTS {
            let current = match expected {
                Some(version) => version,
                None => working_store::read(store, &key, scope)
                    .await?
                    .map_or(0, |d| d.version),
            };
            match working_store::cas(store, &key, scope, current, value.clone()).await? {
                Cas::Written(version) => {
                    let stored = crate::store::Versioned { version, value };
                    return Ok(Response::new(working_to_pb(
                        Some(stored),
                        scope,
                        settings.as_ref(),
                    )));
                }
                Cas::Conflict(now) if r.expected_version.is_some() => {
                    let at = now.map_or(0, |d| d.version);
                    return Err(Status::failed_precondition(format!(
                        "working memory is at version {at}, not the expected_version {current}"
                    )));
                }
                Cas::Conflict(now) => expected = Some(now.map_or(0, |d| d.version)),
            }
        }
        Err(Status::aborted(
            "working memory is being changed concurrently; retry",
        ))
    }
}

fn working_to_pb(
    stored: Option<crate::store::Versioned>,
    scope: Scope,
    settings: Option<&Settings>,
) -> pb::WorkingMemory {
    let (content, version) = stored.map_or((String::new(), 0), |d| {
        (String::from_utf8_lossy(&d.value).into_owned(), d.version)
    });
    pb::WorkingMemory {
        content,
        version,
        scope: scope_to_pb(scope),
        template: settings.map(Settings::template_text).unwrap_or_default(),
    }
}
