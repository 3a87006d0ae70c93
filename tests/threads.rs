//! ThreadService and working memory over real gRPC, on both stores, against the scripted
//! OpenAI-compatible model: listing and paging, updates, deletes that leave nothing behind,
//! ownership and bad input; working memory written by the model in one turn and read in the
//! next, concurrent updates, and the RPCs that read and write it.

mod support;

use std::collections::BTreeSet;

use agentd::model::{MockOpenAi, MockReply};
use agentd::pb;
use agentd::pb::thread_service_client::ThreadServiceClient;
use agentd::server::RunningServer;
use serde_json::{Value, json};
use support::redis::Deployment;
use tonic::Code;
use tonic::transport::Channel;
use tonic_types::StatusExt;

const AGENTS: &str = r##"
[[agents]]
id = "plain"
instructions = "You answer briefly."
model = "mock/test-model"

[[agents]]
id = "approver"
instructions = "You plan."
model = "mock/test-model"
tools = ["tasks"]
require_approval = ["task_write"]

[[agents]]
id = "recaller"
instructions = "You recall."
model = "mock/test-model"
[agents.memory]
embedder = "mock/embed"
semantic_recall = { top_k = 2, message_range = 0, scope = "resource" }

[[agents]]
id = "rememberer"
instructions = "You remember."
model = "mock/test-model"
[agents.memory.working_memory]
template = "# Notes\n- Name:\n"

[[agents]]
id = "profiler"
instructions = "You keep a profile."
model = "mock/test-model"
[agents.memory.working_memory]
scope = "thread"
schema = { type = "object", properties = { name = { type = "string" }, city = { type = "string" } } }
"##;

/// A server on the named store (and what keeps it alive).
struct Env {
    server: RunningServer,
    mock: MockOpenAi,
    redis: Option<Deployment>,
    _dir: tempfile::TempDir,
}

impl Env {
    async fn start(redis: Option<fn() -> Deployment>) -> Self {
        let mock = MockOpenAi::start().await.expect("mock");
        let dir = tempfile::tempdir().expect("temp dir");
        let redis = redis.map(|start| start());
        let url = redis
            .as_ref()
            .map_or("embedded".to_owned(), Deployment::url);
        let config = support::agent_config(&mock, AGENTS, &url, dir.path());
        let server = support::start(config).await;
        Self {
            server,
            mock,
            redis,
            _dir: dir,
        }
    }

    async fn threads(&self) -> ThreadServiceClient<Channel> {
        ThreadServiceClient::new(support::channel(&self.server).await)
    }

    /// One run of `agent` on the thread, to its end.
    async fn run(&self, agent: &str, thread: &str, resource: &str, prompt: &str) -> Vec<pb::Chunk> {
        let mut client = support::agents_client(&self.server).await;
        support::generate(
            &mut client,
            pb::GenerateRequest {
                agent_id: agent.into(),
                prompt: prompt.into(),
                memory: Some(support::memory(thread, resource, None)),
                ..Default::default()
            },
        )
        .await
    }

    /// Every Redis key that mentions `needle` (none on the embedded store: see its unit tests).
    async fn redis_keys_with(&self, needle: &str) -> Vec<String> {
        let Some(redis) = &self.redis else {
            return Vec::new();
        };
        let keys = redis.keys();
        keys.into_iter().filter(|k| k.contains(needle)).collect()
    }
}

/// Runs each case on the embedded store, on one Redis server and on a Redis Cluster.
macro_rules! on_every_store {
    ($($case:ident),* $(,)?) => {
        mod on_embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Env::start(None).await).await;
                }
            )*
        }
        mod on_redis {
            use super::Deployment;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Env::start(Some(Deployment::node)).await).await;
                }
            )*
        }
        mod on_redis_cluster {
            use super::Deployment;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Env::start(Some(Deployment::cluster)).await).await;
                }
            )*
        }
    };
}

on_every_store!(
    threads_list_page_update_and_read_back,
    messages_page_exactly_once_and_delete_by_id,
    delete_thread_leaves_nothing_behind,
    bad_input_and_ownership,
    working_memory_written_in_turn_one_is_read_in_turn_two,
    concurrent_working_memory_updates_both_land,
    working_memory_rpcs,
    deleted_threads_and_messages_leave_recall,
);

fn field_violation(status: &tonic::Status) -> String {
    let bad = status
        .get_details_bad_request()
        .expect("BadRequest details");
    bad.field_violations[0].field.clone()
}

async fn threads_list_page_update_and_read_back(env: Env) {
    let resource = support::unique("r");
    let mut ids = Vec::new();
    for i in 0..5 {
        env.mock.push(MockReply::Text(format!("Answer {i}")));
        let thread = support::unique("t");
        env.run("plain", &thread, &resource, &format!("Question {i}"))
            .await;
        ids.push(thread);
    }
    // Another resource's thread never shows.
    env.mock.push(MockReply::Text("other".into()));
    env.run("plain", &support::unique("t"), "someone-else", "hi")
        .await;

    let mut client = env.threads().await;
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = client
            .list_threads(pb::ListThreadsRequest {
                resource_id: resource.clone(),
                page_size: 2,
                page_token: token.clone(),
                ..Default::default()
            })
            .await
            .expect("list")
            .into_inner();
        assert!(page.threads.len() <= 2);
        seen.extend(page.threads.iter().map(|t| t.id.clone()));
        for t in &page.threads {
            assert_eq!(t.resource_id, resource);
            assert_eq!(t.message_count, 2, "user + assistant");
        }
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(seen, newest_first);

    let updated = client
        .update_thread(pb::UpdateThreadRequest {
            thread_id: ids[0].clone(),
            resource_id: resource.clone(),
            title: Some("Bread".into()),
            metadata: Some(agentd::json::to_proto_struct(
                json!({"topic": "baking"}).as_object().expect("object"),
            )),
        })
        .await
        .expect("update")
        .into_inner();
    assert_eq!(updated.title.as_deref(), Some("Bread"));
    let got = client
        .get_thread(pb::GetThreadRequest {
            thread_id: ids[0].clone(),
            resource_id: resource.clone(),
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(got.title.as_deref(), Some("Bread"));
    let metadata = agentd::json::from_proto_struct(got.metadata.as_ref().expect("metadata"));
    assert_eq!(metadata.get("topic"), Some(&json!("baking")));
    assert!(got.updated_at.expect("updated").seconds >= got.created_at.expect("created").seconds);
    // The update made it the most recently updated thread.
    let by_update = client
        .list_threads(pb::ListThreadsRequest {
            resource_id: resource.clone(),
            page_size: 1,
            order_by: pb::ThreadOrder::Updated.into(),
            ..Default::default()
        })
        .await
        .expect("list by update")
        .into_inner();
    assert_eq!(by_update.threads[0].id, ids[0]);
}

async fn messages_page_exactly_once_and_delete_by_id(env: Env) {
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    for i in 0..4 {
        env.mock.push(MockReply::Text(format!("Answer {i}")));
        env.run("plain", &thread, &resource, &format!("Question {i}"))
            .await;
    }
    let client = env.threads().await;
    let pages = |newest_first: bool| {
        let mut client = client.clone();
        let (thread, resource) = (thread.clone(), resource.clone());
        async move {
            let mut texts = Vec::new();
            let mut ids = Vec::new();
            let mut token = String::new();
            loop {
                let page = client
                    .list_messages(pb::ListMessagesRequest {
                        thread_id: thread.clone(),
                        resource_id: resource.clone(),
                        page_size: 3,
                        page_token: token.clone(),
                        newest_first,
                    })
                    .await
                    .expect("list messages")
                    .into_inner();
                for m in &page.messages {
                    ids.push(m.id.clone());
                    texts.push(text_of(m));
                }
                if page.next_page_token.is_empty() {
                    break;
                }
                token = page.next_page_token;
            }
            (ids, texts)
        }
    };
    let (ids, texts) = pages(false).await;
    assert_eq!(ids.len(), 8);
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        8,
        "each message once"
    );
    assert_eq!(texts[0], "Question 0");
    assert_eq!(texts[7], "Answer 3");
    let (newest, _) = pages(true).await;
    assert_eq!(newest, ids.iter().rev().cloned().collect::<Vec<_>>());

    let deleted = client
        .clone()
        .delete_messages(pb::DeleteMessagesRequest {
            thread_id: thread.clone(),
            resource_id: resource.clone(),
            message_ids: vec![ids[0].clone(), ids[1].clone(), "unknown".into()],
        })
        .await
        .expect("delete messages")
        .into_inner();
    assert_eq!(deleted.deleted, 2);
    let (left, texts) = pages(false).await;
    assert_eq!(left, ids[2..].to_vec());
    assert_eq!(texts[0], "Question 1");
    // The next run reads the history without the deleted messages.
    env.mock.push(MockReply::Text("ok".into()));
    env.run("plain", &thread, &resource, "Again").await;
    let contents = support::sent_texts(&env.mock, 4);
    assert!(
        !contents.iter().any(|c| c == "Question 0") && contents.iter().any(|c| c == "Question 1"),
        "{contents:?}"
    );
}

fn text_of(m: &pb::Message) -> String {
    m.content
        .iter()
        .filter_map(|p| match &p.kind {
            Some(pb::part::Kind::Text(t)) => Some(t.text.clone()),
            _ => None,
        })
        .collect()
}

async fn delete_thread_leaves_nothing_behind(env: Env) {
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    // A run that suspends on an approval, and a task list on the thread.
    env.mock.push(MockReply::ToolCalls(vec![(
        "task_write".into(),
        json!({"tasks": [{"content": "Bake", "status": "pending", "activeForm": "Baking"}]}),
    )]));
    let chunks = env.run("approver", &thread, &resource, "Plan baking").await;
    let result = support::finish(&chunks);
    assert_eq!(result.finish_reason(), pb::FinishReason::Suspended);
    let mut tasks = support::tasks_client(&env.server).await;
    tasks
        .write(pb::WriteRequest {
            thread_id: thread.clone(),
            resource_id: resource.clone(),
            tasks: vec![pb::TaskInput {
                content: "Knead".into(),
                active_form: "Kneading".into(),
                status: pb::TaskStatus::Pending.into(),
                ..Default::default()
            }],
        })
        .await
        .expect("write tasks");
    let mut client = env.threads().await;
    client
        .update_working_memory(pb::UpdateWorkingMemoryRequest {
            resource_id: resource.clone(),
            thread_id: thread.clone(),
            scope: pb::WorkingMemoryScope::Thread.into(),
            content: "# thread notes".into(),
            ..Default::default()
        })
        .await
        .expect("thread working memory");
    assert!(!env.redis_keys_with(&thread).await.is_empty() || env.redis.is_none());

    let out = client
        .delete_thread(pb::DeleteThreadRequest {
            thread_id: thread.clone(),
            resource_id: resource.clone(),
        })
        .await
        .expect("delete")
        .into_inner();
    assert!(out.deleted);
    assert_eq!(out.runs_deleted, 1);
    let again = client
        .delete_thread(pb::DeleteThreadRequest {
            thread_id: thread.clone(),
            resource_id: resource.clone(),
        })
        .await
        .expect("delete again")
        .into_inner();
    assert!(!again.deleted, "a repeated delete is safe");

    let status = client
        .get_thread(pb::GetThreadRequest {
            thread_id: thread.clone(),
            resource_id: resource.clone(),
        })
        .await
        .expect_err("gone");
    assert_eq!(status.code(), Code::NotFound);
    let mut approvals = pb::approval_service_client::ApprovalServiceClient::new(
        support::channel(&env.server).await,
    );
    let pending = approvals
        .list_pending(pb::ListPendingRequest {
            resource_id: Some(resource.clone()),
            ..Default::default()
        })
        .await
        .expect("pending")
        .into_inner();
    assert!(
        pending.runs.is_empty(),
        "the suspended run went with the thread"
    );
    let list = tasks
        .check(pb::CheckRequest {
            thread_id: thread.clone(),
            resource_id: resource.clone(),
        })
        .await
        .expect("check")
        .into_inner();
    assert!(list.tasks.is_empty());
    let remaining = env.redis_keys_with(&thread).await;
    assert!(remaining.is_empty(), "keys left behind: {remaining:?}");
    let remaining = env.redis_keys_with(&result_run_id(&chunks)).await;
    assert!(remaining.is_empty(), "run keys left behind: {remaining:?}");
}

fn result_run_id(chunks: &[pb::Chunk]) -> String {
    chunks.first().map(|c| c.run_id.clone()).unwrap_or_default()
}

async fn bad_input_and_ownership(env: Env) {
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    env.mock.push(MockReply::Text("hi".into()));
    env.run("plain", &thread, &resource, "hello").await;
    let mut client = env.threads().await;
    let status = client
        .get_thread(pb::GetThreadRequest {
            thread_id: thread.clone(),
            resource_id: "intruder".into(),
        })
        .await
        .expect_err("another resource's thread");
    assert_eq!(status.code(), Code::PermissionDenied);
    let status = client
        .delete_thread(pb::DeleteThreadRequest {
            thread_id: thread.clone(),
            resource_id: "intruder".into(),
        })
        .await
        .expect_err("another resource's thread");
    assert_eq!(status.code(), Code::PermissionDenied);
    let status = client
        .list_messages(pb::ListMessagesRequest {
            thread_id: "no-such-thread".into(),
            resource_id: resource.clone(),
            ..Default::default()
        })
        .await
        .expect_err("unknown thread");
    assert_eq!(status.code(), Code::NotFound);
    let status = client
        .list_threads(pb::ListThreadsRequest {
            resource_id: resource.clone(),
            page_token: "garbage".into(),
            ..Default::default()
        })
        .await
        .expect_err("bad token");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(field_violation(&status), "page_token");
    let status = client
        .list_messages(pb::ListMessagesRequest {
            thread_id: thread.clone(),
            resource_id: resource.clone(),
            page_size: 1000,
            ..Default::default()
        })
        .await
        .expect_err("page too large");
    assert_eq!(field_violation(&status), "page_size");
    let status = client
        .list_threads(pb::ListThreadsRequest::default())
        .await
        .expect_err("no resource");
    assert_eq!(field_violation(&status), "resource_id");
    let status = client
        .delete_messages(pb::DeleteMessagesRequest {
            thread_id: thread.clone(),
            resource_id: resource.clone(),
            message_ids: Vec::new(),
        })
        .await
        .expect_err("no ids");
    assert_eq!(field_violation(&status), "message_ids");
    let status = client
        .update_thread(pb::UpdateThreadRequest {
            thread_id: "no-such-thread".into(),
            resource_id: resource.clone(),
            title: Some("x".into()),
            ..Default::default()
        })
        .await
        .expect_err("unknown thread");
    assert_eq!(status.code(), Code::NotFound);
    // Nothing was changed by the refused calls.
    let got = client
        .get_thread(pb::GetThreadRequest {
            thread_id: thread.clone(),
            resource_id: resource.clone(),
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(got.message_count, 2);
}

/// The system messages of the model's n-th request.
fn system_texts(mock: &MockOpenAi, n: usize) -> Vec<String> {
    mock.requests()[n]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "system")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn tool_names(mock: &MockOpenAi, n: usize) -> Vec<String> {
    mock.requests()[n]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn working_memory_written_in_turn_one_is_read_in_turn_two(env: Env) {
    let resource = support::unique("r");
    let (first, second) = (support::unique("t"), support::unique("t"));
    env.mock.push(MockReply::ToolCalls(vec![(
        "updateWorkingMemory".into(),
        json!({"memory": "# Notes\n- Name: Ada\n"}),
    )]));
    env.mock
        .push(MockReply::Text("Nice to meet you, Ada.".into()));
    let chunks = env.run("rememberer", &first, &resource, "I am Ada").await;
    let result = support::finish(&chunks);
    assert_eq!(result.text, "Nice to meet you, Ada.");
    assert_eq!(tool_names(&env.mock, 0), ["updateWorkingMemory"]);
    let system = system_texts(&env.mock, 0);
    assert_eq!(system[0], "You remember.");
    assert!(system[1].starts_with("WORKING_MEMORY_SYSTEM_INSTRUCTION:\n"));
    assert!(
        system[1]
            .contains("<working_memory_template>\n# Notes\n- Name:\n</working_memory_template>")
    );
    assert!(system[1].contains("<working_memory_data>\nnull\n</working_memory_data>"));
    // Computed once per run: the second call of turn 1 still shows no data.
    assert!(system_texts(&env.mock, 1)[1].contains("<working_memory_data>\nnull\n"));
    let tool_result = &env.mock.requests()[1]["messages"];
    assert!(
        tool_result.to_string().contains("success"),
        "the model saw the tool's result"
    );

    // Turn 2, on another thread of the same resource (resource scope).
    env.mock.push(MockReply::Text("Hello again, Ada.".into()));
    env.run("rememberer", &second, &resource, "Who am I?").await;
    let system = system_texts(&env.mock, 2);
    assert!(
        system[1].contains("<working_memory_data>\n# Notes\n- Name: Ada\n\n</working_memory_data>"),
        "{}",
        system[1]
    );
    // The first thread's saved messages hold no trace of the tool.
    let mut client = env.threads().await;
    let page = client
        .list_messages(pb::ListMessagesRequest {
            thread_id: first.clone(),
            resource_id: resource.clone(),
            ..Default::default()
        })
        .await
        .expect("messages")
        .into_inner();
    let saved = serde_json::to_string(&page.messages.iter().map(text_of).collect::<Vec<_>>())
        .expect("json");
    assert_eq!(saved, r#"["I am Ada","Nice to meet you, Ada."]"#);
    assert_eq!(page.messages.len(), 2);
}

async fn concurrent_working_memory_updates_both_land(env: Env) {
    let resource = support::unique("r");
    let thread = support::unique("t");
    // Thread scope: two runs on one thread, each setting another field at once.
    env.mock.push(MockReply::ToolCalls(vec![(
        "updateWorkingMemory".into(),
        json!({"memory": {"name": "Ada"}}),
    )]));
    env.mock.push(MockReply::ToolCalls(vec![(
        "updateWorkingMemory".into(),
        json!({"memory": {"city": "Paris"}}),
    )]));
    env.mock.push(MockReply::Text("ok".into()));
    env.mock.push(MockReply::Text("ok".into()));
    let (a, b) = tokio::join!(
        env.run("profiler", &thread, &resource, "one"),
        env.run("profiler", &thread, &resource, "two"),
    );
    for chunks in [a, b] {
        assert_eq!(
            support::finish(&chunks).finish_reason(),
            pb::FinishReason::Stop
        );
    }
    let mut client = env.threads().await;
    let memory = client
        .get_working_memory(pb::GetWorkingMemoryRequest {
            resource_id: resource.clone(),
            thread_id: thread.clone(),
            agent_id: "profiler".into(),
            ..Default::default()
        })
        .await
        .expect("get")
        .into_inner();
    let value: Value = serde_json::from_str(&memory.content).expect("json");
    assert_eq!(value, json!({"name": "Ada", "city": "Paris"}));
    assert_eq!(memory.version, 2);
    assert_eq!(memory.scope(), pb::WorkingMemoryScope::Thread);
    assert_eq!(memory.template, r#"{"name":"","city":""}"#);
}

async fn working_memory_rpcs(env: Env) {
    let resource = support::unique("r");
    let thread = support::unique("t");
    let mut client = env.threads().await;
    let empty = client
        .get_working_memory(pb::GetWorkingMemoryRequest {
            resource_id: resource.clone(),
            agent_id: "rememberer".into(),
            ..Default::default()
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!((empty.content.as_str(), empty.version), ("", 0));
    assert_eq!(empty.scope(), pb::WorkingMemoryScope::Resource);
    assert_eq!(empty.template, "# Notes\n- Name:");
    let update = |content: &str, expected: Option<u64>| pb::UpdateWorkingMemoryRequest {
        resource_id: resource.clone(),
        content: content.into(),
        expected_version: expected,
        ..Default::default()
    };
    let written = client
        .update_working_memory(update("# Notes\n- Name: Bo\n", Some(0)))
        .await
        .expect("write")
        .into_inner();
    assert_eq!(written.version, 1);
    let stale = client
        .update_working_memory(update("# lost", Some(0)))
        .await
        .expect_err("stale version");
    assert_eq!(stale.code(), Code::FailedPrecondition);
    let forced = client
        .update_working_memory(update("# Notes\n- Name: Cy\n", None))
        .await
        .expect("unconditional write")
        .into_inner();
    assert_eq!(forced.version, 2);
    // The next run reads what the API wrote.
    env.mock.push(MockReply::Text("Hi Cy.".into()));
    env.run("rememberer", &thread, &resource, "hi").await;
    assert!(system_texts(&env.mock, 0)[1].contains("- Name: Cy\n"));

    // With a schema, content must be JSON that matches it.
    let bad = client
        .update_working_memory(pb::UpdateWorkingMemoryRequest {
            resource_id: resource.clone(),
            thread_id: thread.clone(),
            agent_id: "profiler".into(),
            content: r#"{"name": 3}"#.into(),
            ..Default::default()
        })
        .await
        .expect_err("schema mismatch");
    assert_eq!(field_violation(&bad), "content");
    let status = client
        .get_working_memory(pb::GetWorkingMemoryRequest {
            resource_id: resource.clone(),
            scope: pb::WorkingMemoryScope::Thread.into(),
            ..Default::default()
        })
        .await
        .expect_err("thread scope needs a thread");
    assert_eq!(field_violation(&status), "thread_id");
    let status = client
        .get_working_memory(pb::GetWorkingMemoryRequest {
            resource_id: "intruder".into(),
            thread_id: thread.clone(),
            scope: pb::WorkingMemoryScope::Thread.into(),
            ..Default::default()
        })
        .await
        .expect_err("another resource's thread");
    assert_eq!(status.code(), Code::PermissionDenied);
    let status = client
        .get_working_memory(pb::GetWorkingMemoryRequest {
            resource_id: resource.clone(),
            agent_id: "plain".into(),
            ..Default::default()
        })
        .await
        .expect_err("agent without working memory");
    assert_eq!(field_violation(&status), "agent_id");
}

/// Whether the model's n-th request carried recalled messages of another thread.
fn recalled(mock: &MockOpenAi, n: usize) -> Option<String> {
    system_texts(mock, n).into_iter().find(|t| {
        t.starts_with("The following messages were remembered from a different conversation")
    })
}

async fn deleted_threads_and_messages_leave_recall(env: Env) {
    let resource = support::unique("r");
    let (old, other, fresh) = (
        support::unique("t"),
        support::unique("t"),
        support::unique("t"),
    );
    env.mock
        .push(MockReply::Text("Sourdough needs a starter.".into()));
    env.run("recaller", &old, &resource, "sourdough starter recipe")
        .await;
    env.mock.push(MockReply::Text("Rye is dense.".into()));
    env.run("recaller", &other, &resource, "rye bread density")
        .await;
    // Recall finds the old thread's messages from a new one...
    env.mock.push(MockReply::Text("ok".into()));
    env.run("recaller", &fresh, &resource, "sourdough starter again")
        .await;
    let found = recalled(&env.mock, 2).expect("recalled from the old thread");
    assert!(found.contains("sourdough starter recipe"), "{found}");

    // ...and nothing of it once the thread is deleted; the other thread's messages remain.
    let mut client = env.threads().await;
    client
        .delete_thread(pb::DeleteThreadRequest {
            thread_id: old.clone(),
            resource_id: resource.clone(),
        })
        .await
        .expect("delete");
    env.mock.push(MockReply::Text("ok".into()));
    env.run(
        "recaller",
        &support::unique("t"),
        &resource,
        "sourdough starter rye",
    )
    .await;
    let found = recalled(&env.mock, 3).expect("the other thread is still recalled");
    assert!(!found.contains("sourdough starter recipe"), "{found}");
    assert!(found.contains("rye bread density"), "{found}");

    // A deleted message is no longer recalled either.
    let page = client
        .list_messages(pb::ListMessagesRequest {
            thread_id: other.clone(),
            resource_id: resource.clone(),
            ..Default::default()
        })
        .await
        .expect("messages")
        .into_inner();
    let ids = page.messages.iter().map(|m| m.id.clone()).collect();
    client
        .delete_messages(pb::DeleteMessagesRequest {
            thread_id: other.clone(),
            resource_id: resource.clone(),
            message_ids: ids,
        })
        .await
        .expect("delete messages");
    env.mock.push(MockReply::Text("ok".into()));
    env.run(
        "recaller",
        &support::unique("t"),
        &resource,
        "rye bread density",
    )
    .await;
    let found = recalled(&env.mock, 4).unwrap_or_default();
    assert!(!found.contains("rye bread density"), "{found}");
}
