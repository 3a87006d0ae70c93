//! `agentd.v1.TaskService`: converts requests to the reference's tool arguments, runs the
//! shared task-list code and converts the outcome back.

use futures::StreamExt;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use super::error::Violations;
use super::scope::{check_resource, identity};
use super::{check_id, check_text, thread_key, to_i32};
use crate::config::Limits;
use crate::pb;
use crate::store::ThreadKey;
use crate::tasklist::TaskLists;
use crate::tasks::{self, CompleteInput, Task, TaskStatus, UpdateInput, WriteInput};
use crate::tenant::Identity;

/// The TaskService implementation.
pub struct TaskApi {
    lists: TaskLists,
    limits: Limits,
    drain: CancellationToken,
}

impl TaskApi {
    /// A TaskService over `lists`; `drain` ends open Watch streams (UNAVAILABLE).
    pub fn new(lists: TaskLists, limits: Limits, drain: CancellationToken) -> Self {
        Self {
            lists,
            limits,
            drain,
        }
    }
}

fn check_thread(v: &mut Violations, thread_id: &str, resource_id: &str, limits: &Limits) {
    check_id(v, "thread_id", thread_id, limits);
    check_id(v, "resource_id", resource_id, limits);
}

/// A named resource must be in the caller's scope; none (empty) reaches no list, so the
/// reference's "memory required" outcome answers as for anyone.
fn check_scope(caller: &Identity, resource_id: &str) -> Result<(), Status> {
    if resource_id.is_empty() {
        return Ok(());
    }
    check_resource(caller, "resource_id", resource_id)
}

/// Converts a validation failure into INVALID_ARGUMENT naming the reference's field paths.
fn invalid(err: &tasks::ValidationError) -> Status {
    invalid_with(err, |_| None)
}

/// [`invalid`], with some issues' messages replaced by `rewrite(path)`.
fn invalid_with(err: &tasks::ValidationError, rewrite: impl Fn(&str) -> Option<String>) -> Status {
    let mut v = Violations::default();
    for issue in &err.issues {
        let message = rewrite(&issue.path).unwrap_or_else(|| issue.message.clone());
        v.add(issue.path.clone(), message);
    }
    v.into_status()
}

/// What an unset status in a Write is told: the reference's text names its JSON strings, which
/// a proto client never sends.
const STATUS_REQUIRED: &str =
    "must be set: TASK_STATUS_PENDING, TASK_STATUS_IN_PROGRESS or TASK_STATUS_COMPLETED";

/// The status a request's enum value names; `None` for UNSPECIFIED and unknown numbers.
fn status_from_pb(value: i32) -> Option<TaskStatus> {
    pb::TaskStatus::try_from(value)
        .ok()
        .and_then(pb::TaskStatus::to_task_status)
}

fn task_to_pb(task: Task) -> pb::Task {
    pb::Task {
        status: pb::TaskStatus::from(task.status).into(),
        id: task.id,
        content: task.content,
        active_form: task.active_form,
    }
}

fn tasks_to_pb(tasks: Vec<Task>) -> Vec<pb::Task> {
    tasks.into_iter().map(task_to_pb).collect()
}

fn error_code(code: tasks::ErrorCode) -> pb::TaskErrorCode {
    match code {
        tasks::ErrorCode::None => pb::TaskErrorCode::Unspecified,
        tasks::ErrorCode::MemoryRequired => pb::TaskErrorCode::MemoryRequired,
        tasks::ErrorCode::TaskNotFound => pb::TaskErrorCode::TaskNotFound,
        tasks::ErrorCode::MultipleInProgress => pb::TaskErrorCode::MultipleInProgress,
        tasks::ErrorCode::InvalidArguments => pb::TaskErrorCode::InvalidArguments,
    }
}

fn result_to_pb(outcome: tasks::Outcome) -> pb::TaskResult {
    pb::TaskResult {
        content: outcome.content,
        tasks: tasks_to_pb(outcome.tasks),
        is_error: outcome.is_error,
        error_code: error_code(outcome.error_code).into(),
    }
}

fn check_to_pb(outcome: tasks::CheckOutcome) -> pb::TaskCheckResult {
    let s = outcome.summary;
    pb::TaskCheckResult {
        content: outcome.content,
        tasks: tasks_to_pb(outcome.tasks),
        is_error: outcome.is_error,
        error_code: error_code(outcome.error_code).into(),
        summary: Some(pb::TaskSummary {
            total: to_i32(s.total),
            completed: to_i32(s.completed),
            in_progress: to_i32(s.in_progress),
            pending: to_i32(s.pending),
            incomplete: to_i32(s.incomplete),
            has_tasks: s.has_tasks,
            all_completed: s.all_completed,
        }),
        incomplete_tasks: tasks_to_pb(outcome.incomplete_tasks),
    }
}

/// The `task_write` arguments a WriteRequest stands for.
fn write_args(req: &pb::WriteRequest) -> Value {
    let tasks: Vec<Value> = req
        .tasks
        .iter()
        .map(|t| {
            let mut task = Map::new();
            if let Some(id) = &t.id {
                task.insert("id".into(), json!(id));
            }
            task.insert("content".into(), json!(t.content));
            // Unset (or unknown): left out, so the reference's validation names it "Required"
            // in its own order among the task's other problems.
            if let Some(status) = status_from_pb(t.status) {
                task.insert("status".into(), json!(status.as_str()));
            }
            task.insert("activeForm".into(), json!(t.active_form));
            Value::Object(task)
        })
        .collect();
    json!({ "tasks": tasks })
}

/// The `task_update` arguments an UpdateRequest stands for.
fn update_args(req: &pb::UpdateRequest) -> Value {
    let mut args = Map::new();
    args.insert("id".into(), json!(req.id));
    if let Some(content) = &req.content {
        args.insert("content".into(), json!(content));
    }
    if let Some(status) = req.status.and_then(status_from_pb) {
        args.insert("status".into(), json!(status.as_str()));
    }
    if let Some(active_form) = &req.active_form {
        args.insert("activeForm".into(), json!(active_form));
    }
    Value::Object(args)
}

/// A WriteRequest, checked: its thread (`None` without memory) and the validated list.
pub(crate) fn write_request(
    req: &pb::WriteRequest,
    limits: &Limits,
) -> Result<(Option<ThreadKey>, WriteInput), Status> {
    let mut v = Violations::default();
    check_thread(&mut v, &req.thread_id, &req.resource_id, limits);
    if req.tasks.len() > limits.max_tasks {
        v.add(
            "tasks",
            format!("must have at most {} tasks", limits.max_tasks),
        );
    }
    for (i, t) in req.tasks.iter().enumerate() {
        if let Some(id) = &t.id {
            check_id(&mut v, &format!("tasks.{i}.id"), id, limits);
        }
        check_text(&mut v, &format!("tasks.{i}.content"), &t.content, limits);
        check_text(
            &mut v,
            &format!("tasks.{i}.activeForm"),
            &t.active_form,
            limits,
        );
    }
    v.into_result()?;
    let input = tasks::validate_write(&write_args(req)).map_err(|e| {
        invalid_with(&e, |path| {
            let index = path.strip_prefix("tasks.")?.strip_suffix(".status")?;
            let task = req.tasks.get(index.parse::<usize>().ok()?)?;
            status_from_pb(task.status)
                .is_none()
                .then(|| STATUS_REQUIRED.to_owned())
        })
    })?;
    Ok((thread_key(&req.thread_id, &req.resource_id), input))
}

/// An UpdateRequest, checked: its thread (`None` without memory) and the validated patch.
pub(crate) fn update_request(
    req: &pb::UpdateRequest,
    limits: &Limits,
) -> Result<(Option<ThreadKey>, UpdateInput), Status> {
    let mut v = Violations::default();
    check_thread(&mut v, &req.thread_id, &req.resource_id, limits);
    check_id(&mut v, "id", &req.id, limits);
    // Present but unset: the reference has no way to say it, so it is named here.
    if req.status.is_some_and(|s| status_from_pb(s).is_none()) {
        v.add("status", STATUS_REQUIRED);
    }
    for (field, value) in [("content", &req.content), ("activeForm", &req.active_form)] {
        if let Some(value) = value {
            check_text(&mut v, field, value, limits);
        }
    }
    v.into_result()?;
    let input = tasks::validate_update(&update_args(req)).map_err(|e| invalid(&e))?;
    Ok((thread_key(&req.thread_id, &req.resource_id), input))
}

/// A CompleteRequest, checked: its thread (`None` without memory) and the validated id.
pub(crate) fn complete_request(
    req: &pb::CompleteRequest,
    limits: &Limits,
) -> Result<(Option<ThreadKey>, CompleteInput), Status> {
    let mut v = Violations::default();
    check_thread(&mut v, &req.thread_id, &req.resource_id, limits);
    check_id(&mut v, "id", &req.id, limits);
    v.into_result()?;
    let input = tasks::validate_complete(&json!({ "id": req.id })).map_err(|e| invalid(&e))?;
    Ok((thread_key(&req.thread_id, &req.resource_id), input))
}

/// A CheckRequest, checked: its thread (`None` without memory).
pub(crate) fn check_request(
    req: &pb::CheckRequest,
    limits: &Limits,
) -> Result<Option<ThreadKey>, Status> {
    let mut v = Violations::default();
    check_thread(&mut v, &req.thread_id, &req.resource_id, limits);
    v.into_result()?;
    Ok(thread_key(&req.thread_id, &req.resource_id))
}

/// A WatchRequest, checked: its thread (both ids required).
pub(crate) fn watch_request(req: &pb::WatchRequest, limits: &Limits) -> Result<ThreadKey, Status> {
    let mut v = Violations::default();
    check_thread(&mut v, &req.thread_id, &req.resource_id, limits);
    if req.thread_id.is_empty() {
        v.add("thread_id", "must not be empty");
    }
    if req.resource_id.is_empty() {
        v.add("resource_id", "must not be empty");
    }
    v.into_result()?;
    thread_key(&req.thread_id, &req.resource_id)
        .ok_or_else(|| Status::invalid_argument("thread_id and resource_id are required"))
}

#[tonic::async_trait]
impl pb::task_service_server::TaskService for TaskApi {
    async fn write(
        &self,
        request: Request<pb::WriteRequest>,
    ) -> Result<Response<pb::TaskResult>, Status> {
        let caller = identity(request.extensions());
        let req = request.into_inner();
        let (key, input) = write_request(&req, &self.limits)?;
        check_scope(&caller, &req.resource_id)?;
        let Some(key) = key else {
            return Ok(Response::new(result_to_pb(tasks::memory_required())));
        };
        let outcome = self
            .lists
            .apply(&key, move |prev| tasks::write(prev, &input))
            .await?;
        Ok(Response::new(result_to_pb(outcome)))
    }

    async fn update(
        &self,
        request: Request<pb::UpdateRequest>,
    ) -> Result<Response<pb::TaskResult>, Status> {
        let caller = identity(request.extensions());
        let req = request.into_inner();
        let (key, input) = update_request(&req, &self.limits)?;
        check_scope(&caller, &req.resource_id)?;
        let Some(key) = key else {
            return Ok(Response::new(result_to_pb(tasks::memory_required())));
        };
        let outcome = self
            .lists
            .apply(&key, move |prev| tasks::update(prev, &input))
            .await?;
        Ok(Response::new(result_to_pb(outcome)))
    }

    async fn complete(
        &self,
        request: Request<pb::CompleteRequest>,
    ) -> Result<Response<pb::TaskResult>, Status> {
        let caller = identity(request.extensions());
        let req = request.into_inner();
        let (key, input) = complete_request(&req, &self.limits)?;
        check_scope(&caller, &req.resource_id)?;
        let Some(key) = key else {
            return Ok(Response::new(result_to_pb(tasks::memory_required())));
        };
        let outcome = self
            .lists
            .apply(&key, move |prev| tasks::complete(prev, &input))
            .await?;
        Ok(Response::new(result_to_pb(outcome)))
    }

    async fn check(
        &self,
        request: Request<pb::CheckRequest>,
    ) -> Result<Response<pb::TaskCheckResult>, Status> {
        let caller = identity(request.extensions());
        let req = request.into_inner();
        let key = check_request(&req, &self.limits)?;
        check_scope(&caller, &req.resource_id)?;
        let Some(key) = key else {
            return Ok(Response::new(check_to_pb(tasks::memory_required_check())));
        };
        let list = self.lists.load(&key).await?;
        Ok(Response::new(check_to_pb(tasks::check(&list.tasks))))
    }

    type WatchStream = futures::stream::BoxStream<'static, Result<pb::TaskListUpdate, Status>>;

    async fn watch(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let caller = identity(request.extensions());
        let req = request.into_inner();
        let key = watch_request(&req, &self.limits)?;
        check_scope(&caller, &req.resource_id)?;
        let updates = self.lists.watch(&key).await?;
        let stream = updates
            .map(|item| {
                item.map(|list| pb::TaskListUpdate {
                    tasks: tasks_to_pb(list.tasks),
                    version: list.version,
                })
                .map_err(Status::from)
            })
            .boxed();
        Ok(Response::new(super::until_drain(
            stream,
            self.drain.clone(),
        )))
    }
}
