//! The loop against fakes in memory: a scripted model, tools that answer as told,
//! approvals decided in advance, a store that can be made to fail, and viewers that
//! keep every event. No database, no network.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::future::BoxFuture;
use rmcp::model::JsonObject;
use tokio_util::sync::CancellationToken;

use super::ports::{
    AnswerRef, AnswerStore, ApprovalRequest, Approver, EventSink, NewCall, StoreError, StoreResult,
    Tools, TurnRecord, Verdict,
};
use super::{Answer, Answerer, Asking, Limits, Recorder};
use crate::auth::{ChatUser, Via};
use crate::metrics::GatewayMetrics;
use crate::tools::policy::ToolPolicy;
use crate::tools::{CallContext, CallOutcome, Catalogue, RegisteredTool};
use maitred_core::metrics::Metrics;
use maitred_core::settings::gateway_file::Resilience;
use maitred_core::trace_context::TraceContext;
use maitred_llm::router::ModelRouter;
use maitred_llm::{
    ChatModel, ChatRequest, EventStream, FinishReason, ModelError, ModelEvent, Usage,
};
use maitred_protocol::events::{ChatEvent, GroundingEvent};
use maitred_protocol::ids::{
    CallStatus, ConversationId, MessageId, MessageStatus, PartId, Subject, ToolCallId,
};

/// Each request gets the next turn of events.
struct ScriptedModel {
    turns: Mutex<Vec<Vec<ModelEvent>>>,
    requests: AtomicUsize,
}

impl ScriptedModel {
    fn new(turns: Vec<Vec<ModelEvent>>) -> Arc<Self> {
        Arc::new(Self {
            turns: Mutex::new(turns.into_iter().rev().collect()),
            requests: AtomicUsize::new(0),
        })
    }
}

impl ChatModel for ScriptedModel {
    fn name(&self) -> &str {
        "scripted"
    }

    fn stream(&self, _request: ChatRequest) -> BoxFuture<'_, Result<EventStream, ModelError>> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        let turn = self.turns.lock().unwrap().pop();
        Box::pin(async move {
            let events = turn.ok_or_else(|| ModelError::Protocol("the script ran out".into()))?;
            let stream: EventStream = Box::pin(futures::stream::iter(events.into_iter().map(Ok)));
            Ok(stream)
        })
    }
}

fn text(words: &str) -> Vec<ModelEvent> {
    vec![
        ModelEvent::Text(words.to_owned()),
        ModelEvent::Usage(Usage {
            prompt_tokens: 10,
            completion_tokens: 2,
            total_tokens: 12,
        }),
        ModelEvent::Finished(FinishReason::Stop),
    ]
}

fn calls(calls: &[(&str, &str, &str)]) -> Vec<ModelEvent> {
    let mut events: Vec<ModelEvent> = calls
        .iter()
        .enumerate()
        .map(|(index, (id, name, arguments))| ModelEvent::ToolCallDelta {
            index: index as u32,
            id: Some((*id).to_owned()),
            name: Some((*name).to_owned()),
            arguments: Some((*arguments).to_owned()),
        })
        .collect();
    events.push(ModelEvent::Finished(FinishReason::ToolCalls));
    events
}

#[derive(Default)]
struct Viewers {
    events: Mutex<Vec<ChatEvent>>,
    cancel: CancellationToken,
}

#[async_trait]
impl EventSink for Viewers {
    async fn publish(&self, event: ChatEvent) -> StoreResult<u64> {
        let mut events = self.events.lock().unwrap();
        events.push(event);
        Ok(events.len() as u64)
    }

    fn cancelled(&self) -> CancellationToken {
        self.cancel.clone()
    }

    fn interrupted(&self) -> bool {
        false
    }
}

impl Viewers {
    fn named(&self) -> Vec<&'static str> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .map(ChatEvent::name)
            .collect()
    }

    fn results(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                ChatEvent::ToolResult(result) => Some(result.status.to_string()),
                _ => None,
            })
            .collect()
    }

    fn error_code(&self) -> Option<String> {
        self.events.lock().unwrap().iter().find_map(|e| match e {
            ChatEvent::Error(error) => Some(error.code.clone()),
            _ => None,
        })
    }

    fn last(&self) -> ChatEvent {
        self.events.lock().unwrap().last().cloned().unwrap()
    }
}

/// Keeps what it is told; `failing` makes every write fail, as a full disk would.
#[derive(Default)]
struct Parts {
    turns: Mutex<Vec<(String, MessageStatus)>>,
    tool_results: Mutex<Vec<(String, String)>>,
    calls: Mutex<HashMap<ToolCallId, CallStatus>>,
    /// Each stored call's idempotency key.
    keys: Mutex<HashMap<ToolCallId, Option<String>>>,
    /// The grounding kept with each part.
    grounding: Mutex<Vec<(PartId, GroundingEvent)>>,
    failing: AtomicBool,
}

impl Parts {
    fn check(&self) -> StoreResult<()> {
        if self.failing.load(Ordering::SeqCst) {
            Err(StoreError(anyhow::anyhow!("disk full")))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl AnswerStore for Parts {
    async fn save_turn(&self, _answer: &AnswerRef, turn: TurnRecord<'_>) -> StoreResult<()> {
        self.check()?;
        self.turns
            .lock()
            .unwrap()
            .push((turn.text.to_owned(), turn.status));
        Ok(())
    }

    async fn save_tool_result(
        &self,
        _answer: &AnswerRef,
        model_call_id: &str,
        content: &str,
    ) -> StoreResult<()> {
        self.check()?;
        self.tool_results
            .lock()
            .unwrap()
            .push((model_call_id.to_owned(), content.to_owned()));
        Ok(())
    }

    async fn call_started(&self, _answer: &AnswerRef, call: NewCall<'_>) -> StoreResult<()> {
        self.check()?;
        self.calls
            .lock()
            .unwrap()
            .insert(call.id.clone(), CallStatus::Running);
        self.keys
            .lock()
            .unwrap()
            .insert(call.id.clone(), call.idempotency_key.map(str::to_owned));
        Ok(())
    }

    async fn call_finished(
        &self,
        id: &ToolCallId,
        status: CallStatus,
        _duration_ms: u64,
        _summary: &str,
    ) -> StoreResult<()> {
        self.check()?;
        self.calls.lock().unwrap().insert(id.clone(), status);
        Ok(())
    }

    async fn abandon_calls(&self, _answer: &MessageId, status: CallStatus) -> StoreResult<()> {
        for call in self.calls.lock().unwrap().values_mut() {
            if *call == CallStatus::Running {
                *call = status;
            }
        }
        Ok(())
    }

    async fn usage(&self, _answer: &AnswerRef, _model: &str, _usage: Usage) -> StoreResult<()> {
        self.check()
    }

    async fn save_grounding(&self, part: &PartId, grounding: &GroundingEvent) -> StoreResult<()> {
        self.check()?;
        self.grounding
            .lock()
            .unwrap()
            .push((part.clone(), grounding.clone()));
        Ok(())
    }
}

/// Tools that answer with their name and arguments; `unavailable` ones answer as a
/// server behind an open breaker does. `together` calls wait for each other, so
/// only calls run concurrently get through.
struct FakeTools {
    catalogue: Arc<Catalogue>,
    unavailable: Vec<&'static str>,
    /// Tools whose server answers with a task.
    as_tasks: Vec<&'static str>,
    together: Option<Arc<tokio::sync::Barrier>>,
    called: AtomicUsize,
    /// Each call's tool, gateway call id and idempotency key, as sent.
    sent: Mutex<Vec<(String, String, Option<String>)>>,
}

impl FakeTools {
    fn new(tools: &[(&str, bool)]) -> Self {
        let tools = tools
            .iter()
            .map(|(name, read_only)| Arc::new(RegisteredTool::for_test(name, *read_only)))
            .collect();
        Self {
            catalogue: Arc::new(Catalogue::new(tools, Vec::new(), Default::default())),
            unavailable: Vec::new(),
            as_tasks: Vec::new(),
            together: None,
            called: AtomicUsize::new(0),
            sent: Mutex::new(Vec::new()),
        }
    }
}

#[async_trait]
impl Tools for FakeTools {
    async fn catalogue(&self, _owner: Option<&str>) -> Arc<Catalogue> {
        self.catalogue.clone()
    }

    async fn call(
        &self,
        tool: &RegisteredTool,
        arguments: JsonObject,
        context: CallContext<'_>,
    ) -> CallOutcome {
        self.called.fetch_add(1, Ordering::SeqCst);
        self.sent.lock().unwrap().push((
            tool.exposed.clone(),
            context.tool_call_id.to_owned(),
            context.idempotency_key.map(str::to_owned),
        ));
        if let Some(barrier) = &self.together {
            barrier.wait().await;
        }
        if self.unavailable.contains(&tool.exposed.as_str()) {
            return CallOutcome::Unavailable("failed repeatedly and is not called for now".into());
        }
        if self.as_tasks.contains(&tool.exposed.as_str()) {
            return CallOutcome::Task(crate::tools::StartedTask {
                task_id: "t-1".into(),
                status_message: Some("day 1 of 30".into()),
                poll_interval_ms: Some(500),
            });
        }
        CallOutcome::Ok {
            text: format!("{} {}", tool.exposed, serde_json::Value::Object(arguments)),
            structured: None,
        }
    }
}

/// Adopts tasks up to `limit`, and remembers which.
#[derive(Default)]
struct Background {
    limit: Option<usize>,
    adopted: Mutex<Vec<(String, String, String)>>,
}

#[async_trait]
impl super::ports::BackgroundTasks for Background {
    async fn adopt(&self, task: super::ports::NewTask<'_>) -> StoreResult<super::ports::Adopted> {
        let mut adopted = self.adopted.lock().unwrap();
        if self.limit.is_some_and(|limit| adopted.len() >= limit) {
            return Ok(super::ports::Adopted::OverLimit {
                limit: adopted.len(),
                whose: "The user",
            });
        }
        adopted.push((
            task.exposed.to_owned(),
            task.model_call_id.to_owned(),
            task.started.task_id.clone(),
        ));
        Ok(super::ports::Adopted::Followed(
            maitred_protocol::ids::TaskId::new(),
        ))
    }
}

struct Decided(Verdict);

#[async_trait]
impl Approver for Decided {
    async fn remembered(&self, _request: &ApprovalRequest<'_>) -> StoreResult<bool> {
        Ok(self.0 == Verdict::Remembered)
    }

    async fn open(&self, _request: &ApprovalRequest<'_>) -> StoreResult<String> {
        Ok("2026-11-24T12:00:00Z".to_owned())
    }

    async fn asked(
        &self,
        _id: &maitred_protocol::ids::ToolCallId,
    ) -> StoreResult<super::ports::Asked> {
        Ok(super::ports::Asked::Never)
    }

    async fn wait(
        &self,
        _request: &ApprovalRequest<'_>,
        _cancel: &CancellationToken,
    ) -> StoreResult<Verdict> {
        Ok(self.0)
    }
}

/// The fake tools never ask the person anything; were one to, nobody answers.
struct Unanswered;

#[async_trait]
impl super::ports::Inputs for Unanswered {
    async fn open(&self, _request: &super::ports::InputRequest<'_>) -> StoreResult<String> {
        Ok("2026-11-24T12:00:00Z".to_owned())
    }

    async fn shown(&self, _id: &maitred_protocol::ids::InputId, _seq: u64) -> StoreResult<()> {
        Ok(())
    }

    async fn wait(
        &self,
        _request: &super::ports::InputRequest<'_>,
        _cancel: &CancellationToken,
    ) -> StoreResult<crate::tools::InputReply> {
        Ok(crate::tools::InputReply::only(
            maitred_protocol::events::InputAction::Cancel,
        ))
    }
}

struct Setup {
    model: Arc<ScriptedModel>,
    tools: FakeTools,
    verdict: Verdict,
    max_iterations: u32,
    asking: Asking,
    background: Arc<Background>,
    budgets: Arc<dyn super::ports::Budgets>,
}

struct Ran {
    viewers: Arc<Viewers>,
    parts: Arc<Parts>,
    tools: Arc<FakeTools>,
    background: Arc<Background>,
    metrics: Metrics,
}

impl Setup {
    fn new(turns: Vec<Vec<ModelEvent>>) -> Self {
        Self {
            model: ScriptedModel::new(turns),
            tools: FakeTools::new(&[
                ("shop__listItems", true),
                ("shop__getItem", true),
                ("shop__orderItem", false),
            ]),
            verdict: Verdict::Approved,
            max_iterations: 10,
            asking: Asking::Person,
            background: Arc::default(),
            budgets: Arc::new(super::ports::NoBudgets),
        }
    }

    async fn run(self, parts: Parts) -> Ran {
        let registry = Metrics::new();
        let metrics = GatewayMetrics::register(&registry);
        let tools = Arc::new(self.tools);
        let answerer = Answerer {
            models: ModelRouter::new(
                vec![self.model.clone()],
                Resilience::default(),
                Arc::new(crate::live::LocalModelLimits::new(&Resilience::default())),
            ),
            policy: ToolPolicy::default(),
            tools: tools.clone(),
            approvals: Arc::new(Decided(self.verdict)),
            inputs: Arc::new(Unanswered),
            background: self.background.clone(),
            limits: Limits {
                max_iterations: self.max_iterations,
                tool_calls_per_question: 25,
                tool_output_cap: 16 * 1024,
                system_prompt: None,
                max_output_tokens: 256,
            },
            metrics: metrics.clone(),
            budgets: self.budgets.clone(),
        };
        let viewers = Arc::new(Viewers::default());
        let parts = Arc::new(parts);
        let recorder = Recorder::new(
            AnswerRef {
                message: MessageId::new(),
                conversation: ConversationId::new(),
                owner: Subject::new("ann"),
            },
            viewers.clone(),
            parts.clone(),
            metrics,
            Instant::now(),
        );
        let user = ChatUser {
            subject: Subject::new("ann"),
            name: None,
            email: None,
            roles: Vec::new(),
            via: Via::Bearer,
            credential: None,
        };
        let answer = Answer {
            recorder: &recorder,
            user: &user,
            trace: TraceContext::new_root(),
            asking: self.asking,
        };
        tokio::time::timeout(
            Duration::from_secs(5),
            answerer.run(&answer, Vec::new(), "What is in stock?".into()),
        )
        .await
        .expect("the answer ends");
        Ran {
            viewers,
            parts,
            tools,
            background: self.background,
            metrics: registry,
        }
    }
}

fn finish_reason(event: &ChatEvent) -> String {
    match event {
        ChatEvent::Done(done) => serde_json::to_value(&done.finish_reason)
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned(),
        other => panic!("the last event is {}", other.name()),
    }
}

#[tokio::test]
async fn parallel_calls_run_together_and_their_results_go_back_in_order() {
    let mut setup = Setup::new(vec![
        calls(&[
            ("c1", "shop__listItems", r#"{"limit":2}"#),
            ("c2", "shop__getItem", r#"{"id":"i7"}"#),
        ]),
        text("Two items, and i7."),
    ]);
    // Each call waits for the other: run one after the other, they would never end.
    setup.tools.together = Some(Arc::new(tokio::sync::Barrier::new(2)));
    let ran = setup.run(Parts::default()).await;

    assert_eq!(
        ran.viewers.named(),
        [
            "tool_call",
            "tool_call",
            "tool_result",
            "tool_result",
            "token",
            "grounding",
            "usage",
            "done"
        ]
    );
    assert_eq!(ran.viewers.results(), ["ok", "ok"]);
    let results = ran.parts.tool_results.lock().unwrap().clone();
    assert_eq!(results[0].0, "c1");
    assert!(results[0].1.starts_with("shop__listItems"));
    assert_eq!(results[1].0, "c2");
    assert_eq!(finish_reason(&ran.viewers.last()), "stop");
    let turns = ran.parts.turns.lock().unwrap().clone();
    assert_eq!(
        turns.last().unwrap(),
        &("Two items, and i7.".to_owned(), MessageStatus::Complete)
    );
}

#[tokio::test]
async fn a_write_is_sent_with_the_idempotency_key_stored_with_it_and_a_read_with_none() {
    let setup = Setup::new(vec![
        calls(&[
            ("c1", "shop__listItems", r#"{"limit":2}"#),
            ("c2", "shop__orderItem", r#"{"id":"i7"}"#),
        ]),
        text("Ordered."),
    ]);
    let ran = setup.run(Parts::default()).await;

    assert_eq!(ran.viewers.results(), ["ok", "ok"]);
    let mut sent = ran.tools.sent.lock().unwrap().clone();
    sent.sort();
    let keys = ran.parts.keys.lock().unwrap().clone();
    let stored = |id: &str| keys[&id.parse::<ToolCallId>().unwrap()].clone();
    let (tool, read, key) = &sent[0];
    assert_eq!((tool.as_str(), key), ("shop__listItems", &None));
    assert_eq!(stored(read), None);
    let (tool, write, key) = &sent[1];
    assert_eq!(tool, "shop__orderItem");
    let key = key.clone().expect("a write is sent with a key");
    assert!(key.starts_with("mtd-") && key.len() == 36, "{key}");
    assert_eq!(stored(write), Some(key), "the key sent is the key stored");
}

#[tokio::test]
async fn where_nobody_can_be_asked_a_write_is_refused_without_waiting() {
    let mut setup = Setup::new(vec![
        calls(&[("c1", "shop__orderItem", r#"{"id":"i7"}"#)]),
        text("I could not order it."),
    ]);
    setup.asking = Asking::Never {
        why: "approvals are not possible here",
    };
    let ran = setup.run(Parts::default()).await;

    assert_eq!(
        ran.viewers.named(),
        [
            "tool_call",
            "tool_result",
            "token",
            "grounding",
            "usage",
            "done"
        ]
    );
    assert_eq!(ran.viewers.results(), ["denied"]);
    assert_eq!(ran.tools.called.load(Ordering::SeqCst), 0);
    let told = ran.parts.tool_results.lock().unwrap()[0].1.clone();
    assert!(
        told.starts_with("Refused") && told.contains("approvals are not possible here"),
        "{told}"
    );
}

#[tokio::test]
async fn where_nobody_can_be_asked_a_remembered_approval_still_counts() {
    let mut setup = Setup::new(vec![
        calls(&[("c1", "shop__orderItem", r#"{"id":"i7"}"#)]),
        text("Ordered."),
    ]);
    setup.asking = Asking::Never {
        why: "approvals are not possible here",
    };
    setup.verdict = Verdict::Remembered;
    let ran = setup.run(Parts::default()).await;

    assert_eq!(ran.viewers.results(), ["ok"]);
    assert_eq!(ran.tools.called.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_denied_approval_runs_nothing_and_the_model_is_told() {
    let mut setup = Setup::new(vec![
        calls(&[("c1", "shop__orderItem", r#"{"id":"i7"}"#)]),
        text("I did not order it."),
    ]);
    setup.verdict = Verdict::Denied;
    let ran = setup.run(Parts::default()).await;

    assert_eq!(
        ran.viewers.named(),
        [
            "tool_call",
            "approval_required",
            "tool_result",
            "token",
            "grounding",
            "usage",
            "done"
        ]
    );
    assert_eq!(ran.viewers.results(), ["denied"]);
    assert_eq!(ran.tools.called.load(Ordering::SeqCst), 0);
    let told = ran.parts.tool_results.lock().unwrap()[0].1.clone();
    assert!(told.contains("did not allow"), "{told}");
}

#[tokio::test]
async fn a_server_behind_an_open_breaker_is_unavailable_and_the_answer_goes_on() {
    let mut setup = Setup::new(vec![
        calls(&[("c1", "shop__listItems", "{}")]),
        text("The shop is unavailable."),
    ]);
    setup.tools.unavailable = vec!["shop__listItems"];
    let ran = setup.run(Parts::default()).await;

    assert_eq!(ran.viewers.results(), ["unavailable"]);
    let told = ran.parts.tool_results.lock().unwrap()[0].1.clone();
    assert!(told.contains("do not retry"), "{told}");
    assert_eq!(finish_reason(&ran.viewers.last()), "stop");
}

#[tokio::test]
async fn a_call_that_becomes_a_task_is_handed_over_and_the_answer_ends_normally() {
    let mut setup = Setup::new(vec![
        calls(&[("c1", "shop__listItems", "{}")]),
        text("The list is being made; it will be posted here."),
    ]);
    setup.tools.as_tasks = vec!["shop__listItems"];
    let ran = setup.run(Parts::default()).await;

    assert_eq!(ran.viewers.results(), ["ok"]);
    let told = ran.parts.tool_results.lock().unwrap()[0].1.clone();
    assert!(told.contains("runs in the background"), "{told}");
    assert_eq!(
        *ran.background.adopted.lock().unwrap(),
        [("shop__listItems".into(), "c1".into(), "t-1".into())]
    );
    assert_eq!(finish_reason(&ran.viewers.last()), "stop");
}

#[tokio::test]
async fn a_task_over_the_limit_is_refused_and_the_model_is_told_why() {
    let mut setup = Setup::new(vec![
        calls(&[("c1", "shop__listItems", "{}")]),
        text("Too many tasks."),
    ]);
    setup.tools.as_tasks = vec!["shop__listItems"];
    setup.background = Arc::new(Background {
        limit: Some(0),
        ..Background::default()
    });
    let ran = setup.run(Parts::default()).await;

    assert_eq!(ran.viewers.results(), ["error"]);
    let told = ran.parts.tool_results.lock().unwrap()[0].1.clone();
    assert!(told.contains("background tasks running"), "{told}");
    assert!(ran.background.adopted.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_model_that_never_stops_calling_tools_is_stopped_after_max_iterations() {
    let turns = (0..3)
        .map(|i| calls(&[(&format!("c{i}"), "shop__listItems", "{}")]))
        .collect();
    let mut setup = Setup::new(turns);
    setup.max_iterations = 3;
    let ran = setup.run(Parts::default()).await;

    assert_eq!(ran.viewers.results(), ["ok", "ok", "ok"]);
    assert_eq!(ran.model_requests(), 3);
    assert_eq!(finish_reason(&ran.viewers.last()), "max_iterations");
}

#[tokio::test]
async fn an_unknown_tool_is_an_error_the_model_can_correct() {
    let setup = Setup::new(vec![
        calls(&[("c1", "shop__sellEverything", "{}")]),
        text("There is no such tool."),
    ]);
    let ran = setup.run(Parts::default()).await;

    assert_eq!(ran.viewers.results(), ["error"]);
    let told = ran.parts.tool_results.lock().unwrap()[0].1.clone();
    assert!(told.contains("Available tools: shop__listItems"), "{told}");
}

/// Failing to store the answer is not the model's fault: it ends the answer with its
/// own code, and is counted under it, not as a model error.
#[tokio::test]
async fn a_storage_failure_ends_the_answer_as_storage_not_as_a_model_error() {
    let setup = Setup::new(vec![text("Plenty in stock.")]);
    let parts = Parts::default();
    parts.failing.store(true, Ordering::SeqCst);
    let ran = setup.run(parts).await;

    assert_eq!(ran.viewers.error_code().as_deref(), Some("storage"));
    assert_eq!(finish_reason(&ran.viewers.last()), "error");
    let page = ran.metrics.render();
    assert!(
        page.contains(r#"gateway_answer_errors_total{code="storage"} 1"#),
        "{page}"
    );
    assert!(!page.contains("gateway_model_errors_total{"), "{page}");
}

impl Ran {
    fn model_requests(&self) -> usize {
        self.viewers
            .events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| matches!(e, ChatEvent::ToolResult(_)))
            .count()
    }
}

/// A budget that allows `turns` model turns, and keeps what each asked and used.
#[derive(Default)]
struct Allowance {
    turns: Mutex<u32>,
    asked: Mutex<Vec<(u64, u64)>>,
    settled: Mutex<Vec<(String, u64, u64)>>,
}

#[async_trait::async_trait]
impl super::ports::Budgets for Allowance {
    async fn reserve(
        &self,
        ask: &super::ports::BudgetAsk<'_>,
    ) -> StoreResult<super::ports::Reserved> {
        self.asked
            .lock()
            .unwrap()
            .push((ask.input_tokens, ask.output_tokens));
        let mut turns = self.turns.lock().unwrap();
        let left = super::ports::Remaining {
            scope: "person".into(),
            window: "daily".into(),
            tokens: Some(i64::from(*turns)),
            cost_micros: None,
        };
        if *turns == 0 {
            return Ok(super::ports::Reserved::Refused(left));
        }
        *turns -= 1;
        Ok(super::ports::Reserved::Held(super::ports::Held {
            id: format!("r{turns}"),
        }))
    }

    async fn settle(
        &self,
        held: &super::ports::Held,
        _model: &str,
        input_tokens: u64,
        output_tokens: u64,
    ) -> StoreResult<Option<super::ports::Remaining>> {
        self.settled
            .lock()
            .unwrap()
            .push((held.id.clone(), input_tokens, output_tokens));
        Ok(Some(super::ports::Remaining {
            scope: "person".into(),
            window: "daily".into(),
            tokens: Some(i64::from(*self.turns.lock().unwrap())),
            cost_micros: None,
        }))
    }
}

#[tokio::test]
async fn a_turn_its_budget_cannot_cover_is_not_sent_and_the_answer_stops_with_budget() {
    let mut setup = Setup::new(vec![
        calls(&[("c1", "shop__listItems", r#"{"limit":2}"#)]),
        text("Two items."),
    ]);
    let allowance = Arc::new(Allowance {
        turns: Mutex::new(1),
        ..Allowance::default()
    });
    setup.budgets = allowance.clone();
    let model = setup.model.clone();
    let ran = setup.run(Parts::default()).await;

    let named = ran.viewers.named();
    assert_eq!(
        named,
        [
            "budget",
            "tool_call",
            "tool_result",
            "budget",
            "error",
            "done"
        ],
        "{named:?}"
    );
    let events = ran.viewers.events.lock().unwrap().clone();
    assert!(events.iter().any(
        |e| matches!(e, ChatEvent::Error(e) if e.code == "budget" && e.message.contains("budget"))
    ));
    assert_eq!(finish_reason(events.last().unwrap()), "error");
    // The first turn was reserved at its estimate plus the output cap, and settled;
    // the second was refused before the model was asked.
    let asked = allowance.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2);
    assert!(
        asked
            .iter()
            .all(|(input, output)| *input > 0 && *output == 256)
    );
    let settled = allowance.settled.lock().unwrap().clone();
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(model.requests.load(Ordering::SeqCst), 1);
}
