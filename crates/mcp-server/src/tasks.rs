//! Tool calls that run as tasks (the `io.modelcontextprotocol/tasks` extension,
//! SEP-2663, of the 2026-07-28 revision): rmcp's `TaskManager` runs them and answers
//! `tasks/get`, `tasks/update` and `tasks/cancel`; this adds who may see them. A task
//! belongs to the caller that started it (its token's subject and the clients acting
//! for it), and to the client that acted for a person when it started it, calling as
//! itself: a gateway that follows a person's task after their token has expired. Any
//! other caller is told there is no such task, as for an id never issued.
//! Every task also stops when the role shuts down.
//!
//! Tasks running at once are capped per caller (the owner's key: its subject and
//! the clients acting for it) and for every caller together: a call past either cap
//! is answered with a tool error, and starts nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use rmcp::model::{CreateTaskResult, DetailedTask, InputResponses, ProtocolVersion};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskContext, TaskExit, TaskFuture, TaskManager, TaskOptions};
use rmcp::{ErrorData, RoleServer};
use tokio_util::sync::CancellationToken;

use super::metrics::TaskLabels;
use maitred_core::auth::Principal;

/// How long a task may run (a person's answer to its form included), and how long
/// its outcome is kept after it ends.
const TASK_TTL_MS: u64 = 30 * 60 * 1000;

/// How often a client should ask how a task is doing.
pub(super) const POLL_INTERVAL_MS: u64 = 750;

/// Whether this call may be answered with a task: a 2026-07-28 caller that declared
/// the tasks extension (in the request's `_meta` capabilities, or at initialize).
pub(super) fn declared(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
        && ctx
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks())
}

/// Who calls about a task: the caller's subject and the clients acting for it (over
/// stdio, the local user).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Owner {
    key: String,
    /// The client that acted for the subject (the newest actor), if any.
    actor: Option<String>,
    /// The caller itself, when it presents a token of its own (no actor).
    itself: Option<String>,
}

impl Owner {
    /// Whether `caller` may see this owner's task: the same caller, or the client
    /// that acted for this owner, calling as itself.
    fn admits(&self, caller: &Owner) -> bool {
        self.key == caller.key || (self.actor.is_some() && self.actor == caller.itself)
    }
}

impl From<&str> for Owner {
    fn from(key: &str) -> Self {
        Self {
            key: key.to_owned(),
            actor: None,
            itself: Some(key.to_owned()),
        }
    }
}

pub(super) fn owner(caller: Option<&Principal>) -> Owner {
    match caller {
        Some(p) => Owner {
            key: format!("{}\u{0}{}", p.subject, p.actors.join(" ")),
            actor: p.actors.first().cloned(),
            itself: p.actors.is_empty().then(|| p.subject.clone()),
        },
        None => Owner {
            key: "local".to_owned(),
            actor: None,
            itself: None,
        },
    }
}

/// The tasks of every caller; clones share them.
#[derive(Clone)]
pub(super) struct Tasks {
    manager: TaskManager,
    /// Task id → its owner, for the tasks the manager still keeps.
    owners: Arc<Mutex<HashMap<String, Owner>>>,
    shutdown: CancellationToken,
    finished: Family<TaskLabels, Counter>,
    /// Tasks one owner, and every owner together, may have running at once.
    per_owner: usize,
    in_all: usize,
}

/// A task not started: its caller, or everyone, has as many running as they may.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Capped {
    #[error(
        "you have {0} tasks running already, as many as this server runs for one caller; wait for one to finish, or cancel one, then try again"
    )]
    Caller(usize),
    #[error(
        "this server is running as many tasks as it runs at once ({0}); try again in a few minutes"
    )]
    Everyone(usize),
}

impl Tasks {
    pub(super) fn new(
        shutdown: CancellationToken,
        finished: Family<TaskLabels, Counter>,
        per_owner: usize,
        in_all: usize,
    ) -> Self {
        Self {
            manager: TaskManager::new(),
            owners: Arc::default(),
            shutdown,
            finished,
            per_owner,
            in_all,
        }
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<String, Owner>> {
        self.owners.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts `job` as a task of `owner`'s, for the tool `tool`; the answer to the
    /// `tools/call` that asked for it.
    pub(super) fn start(
        &self,
        owner: Owner,
        tool: &'static str,
        status: String,
        job: impl FnOnce(TaskContext) -> TaskFuture,
    ) -> Result<CreateTaskResult, Capped> {
        // Counted and recorded under one lock, so a burst cannot pass the caps.
        let mut owners = self.owners();
        // Forget the owners of tasks the manager has let go (expired, evicted).
        owners.retain(|id, _| self.manager.get_task(id).is_ok());
        let running = |id: &String| {
            self.manager
                .get_task(id)
                .is_ok_and(|task| !task.status().is_terminal())
        };
        let mut everyone = 0;
        let mut theirs = 0;
        for (id, held) in owners.iter() {
            if running(id) {
                everyone += 1;
                if held.key == owner.key {
                    theirs += 1;
                }
            }
        }
        if theirs >= self.per_owner {
            tracing::warn!(
                tool,
                running = theirs,
                "a caller's task refused: at its cap"
            );
            return Err(Capped::Caller(self.per_owner));
        }
        if everyone >= self.in_all {
            tracing::warn!(
                tool,
                running = everyone,
                "a task refused: the server is at its cap"
            );
            return Err(Capped::Everyone(self.in_all));
        }
        let options = TaskOptions::new()
            .with_ttl_ms(TASK_TTL_MS)
            .with_poll_interval_ms(POLL_INTERVAL_MS)
            .with_status_message(status);
        let shutdown = self.shutdown.clone();
        let finished = self.finished.clone();
        let task = self.manager.spawn(options, move |context| {
            let run = job(context);
            Box::pin(async move {
                let ended = tokio::select! {
                    ended = run => ended,
                    () = shutdown.cancelled() => Err(TaskExit::Error(ErrorData::internal_error(
                        "the MCP server stopped before the task ended; start it again",
                        None,
                    ))),
                };
                let status = match &ended {
                    Ok(_) => "completed",
                    Err(TaskExit::Cancelled) => "cancelled",
                    Err(TaskExit::Error(_)) => "failed",
                };
                finished.get_or_create(&TaskLabels { tool, status }).inc();
                ended
            })
        });
        owners.insert(task.task_id.clone(), owner);
        Ok(CreateTaskResult::new(task))
    }

    /// The task `id` if it is `owner`'s; any other is unknown (-32602), as the
    /// extension answers for an id it never issued.
    fn check(&self, caller: &Owner, id: &str) -> Result<(), ErrorData> {
        if self.owners().get(id).is_some_and(|o| o.admits(caller)) {
            return Ok(());
        }
        if self.owners().contains_key(id) {
            tracing::warn!(
                task = id,
                "a caller asked for a task another caller started"
            );
        }
        Err(ErrorData::invalid_params(
            format!("unknown task: {id}"),
            None,
        ))
    }

    /// `tasks/get`.
    pub(super) fn get(&self, owner: &Owner, id: &str) -> Result<DetailedTask, ErrorData> {
        self.check(owner, id)?;
        self.manager.get_task(id)
    }

    /// `tasks/update`: the answers to the task's input requests.
    pub(super) fn update(
        &self,
        owner: &Owner,
        id: &str,
        responses: InputResponses,
    ) -> Result<(), ErrorData> {
        self.check(owner, id)?;
        self.manager.update_task(id, responses)
    }

    /// `tasks/cancel`: the task stops at its next step.
    pub(super) fn cancel(&self, owner: &Owner, id: &str) -> Result<(), ErrorData> {
        self.check(owner, id)?;
        self.manager.cancel_task(id)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rmcp::model::{CallToolResult, ContentBlock, TaskStatus};

    use super::*;

    fn tasks() -> Tasks {
        Tasks::new(CancellationToken::new(), Family::default(), 100, 100)
    }

    fn forever(context: TaskContext) -> TaskFuture {
        Box::pin(async move {
            context.cancelled().await;
            Err(TaskExit::Cancelled)
        })
    }

    async fn settled(tasks: &Tasks, owner: &str, id: &str) -> TaskStatus {
        let owner: Owner = owner.into();
        for _ in 0..200 {
            let status = tasks.get(&owner, id).unwrap().status();
            if status.is_terminal() {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the task did not end");
    }

    #[tokio::test]
    async fn a_task_is_only_its_owners() {
        let tasks = tasks();
        let created = tasks
            .start("alice".into(), "t", "starting".into(), forever)
            .unwrap();
        let id = created.task.task_id.clone();
        for error in [
            tasks.get(&"mallory".into(), &id).unwrap_err(),
            tasks.cancel(&"mallory".into(), &id).unwrap_err(),
            tasks
                .update(&"mallory".into(), &id, InputResponses::new())
                .unwrap_err(),
        ] {
            assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
            assert_eq!(error.message, format!("unknown task: {id}"));
        }
        assert_eq!(
            tasks.get(&"alice".into(), &id).unwrap().status(),
            TaskStatus::Working
        );
        tasks.cancel(&"alice".into(), &id).unwrap();
        assert_eq!(settled(&tasks, "alice", &id).await, TaskStatus::Cancelled);
    }

    fn principal(subject: &str, actors: &[&str]) -> Principal {
        Principal {
            subject: subject.to_owned(),
            actors: actors.iter().map(|a| (*a).to_owned()).collect(),
            ..Principal::default()
        }
    }

    /// The gateway starts a task for a person with the person's exchanged token, and
    /// follows it with its own once that token has expired; nobody else can.
    #[tokio::test]
    async fn the_client_that_acted_for_a_person_follows_their_task_as_itself() {
        let tasks = tasks();
        let for_ada = owner(Some(&principal("ada", &["maitred-gateway"])));
        let created = tasks
            .start(for_ada.clone(), "t", "starting".into(), forever)
            .unwrap();
        let id = created.task.task_id.clone();
        let gateway = owner(Some(&principal("maitred-gateway", &[])));
        assert!(tasks.get(&for_ada, &id).is_ok());
        assert!(tasks.get(&gateway, &id).is_ok());
        for stranger in [
            owner(Some(&principal("other-client", &[]))),
            owner(Some(&principal("bob", &["maitred-gateway"]))),
            owner(Some(&principal("ada", &[]))),
            owner(Some(&principal("ada", &["other-client"]))),
            owner(None),
        ] {
            let error = tasks.get(&stranger, &id).unwrap_err();
            assert_eq!(
                error.code,
                rmcp::model::ErrorCode::INVALID_PARAMS,
                "{stranger:?}"
            );
        }
        tasks.cancel(&gateway, &id).unwrap();
        for _ in 0..200 {
            if tasks.get(&gateway, &id).unwrap().status() == TaskStatus::Cancelled {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the cancel did not reach the task");
    }

    #[tokio::test]
    async fn shutting_down_fails_the_running_tasks() {
        let shutdown = CancellationToken::new();
        let finished = Family::<TaskLabels, Counter>::default();
        let tasks = Tasks::new(shutdown.clone(), finished.clone(), 100, 100);
        let running = tasks
            .start("a".into(), "t", "starting".into(), forever)
            .unwrap();
        let done = tasks
            .start("a".into(), "t", "starting".into(), |_| {
                Box::pin(async { Ok(CallToolResult::success(vec![ContentBlock::text("ok")])) })
            })
            .unwrap();
        assert_eq!(
            settled(&tasks, "a", &done.task.task_id).await,
            TaskStatus::Completed
        );
        shutdown.cancel();
        assert_eq!(
            settled(&tasks, "a", &running.task.task_id).await,
            TaskStatus::Failed
        );
        let count = |status| {
            finished
                .get_or_create(&TaskLabels { tool: "t", status })
                .get()
        };
        assert_eq!((count("completed"), count("failed")), (1, 1));
    }

    /// One caller starting task after task, then everyone: past either cap nothing
    /// starts; a task that ends frees its place.
    #[tokio::test]
    async fn tasks_are_capped_per_caller_and_in_all() {
        let tasks = Tasks::new(CancellationToken::new(), Family::default(), 2, 3);
        let alice = || Owner::from("alice");
        let first = tasks.start(alice(), "t", "s".into(), forever).unwrap();
        tasks.start(alice(), "t", "s".into(), forever).unwrap();
        assert_eq!(
            tasks.start(alice(), "t", "s".into(), forever).unwrap_err(),
            Capped::Caller(2)
        );
        tasks.start("bob".into(), "t", "s".into(), forever).unwrap();
        assert_eq!(
            tasks
                .start("carol".into(), "t", "s".into(), forever)
                .unwrap_err(),
            Capped::Everyone(3)
        );
        tasks.cancel(&alice(), &first.task.task_id).unwrap();
        settled(&tasks, "alice", &first.task.task_id).await;
        tasks.start(alice(), "t", "s".into(), forever).unwrap();
    }
}
