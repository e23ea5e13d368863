//! Every replica's watcher: it polls the background tasks that are due and that no
//! live replica holds, and records what their servers say. A task's lease outlasts
//! its poll interval, so the replica that polls it keeps it while it lives; when it
//! dies, the lease runs out and another replica takes the task over.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::rows::{Ended, Polled, now_ms};
use super::view::TaskInput;
use super::{TaskBook, TaskRow, follow_up, poll_interval};
use crate::GatewayState;
use crate::tools::{CallOutcome, HubError, TaskState};
use maitred_protocol::ids::{MessageId, TaskStatus};
use rmcp::model::ElicitRequestParams;

/// How often the watcher looks for tasks due.
const TICK: Duration = Duration::from_millis(250);
/// Tasks polled at once by one replica.
const BATCH: i64 = 16;
/// A follow-up claimed this long ago and never started is posted again.
const UNPOSTED_AFTER_MS: i64 = 30_000;
/// The longest wait between polls of a server that cannot be reached.
const MAX_BACKOFF_MS: i64 = 60_000;

/// Runs until `shutdown`.
pub async fn watch(
    state: GatewayState,
    book: Arc<TaskBook>,
    lease: Duration,
    shutdown: CancellationToken,
) {
    let replica = state.live.replica().to_owned();
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(15_000);
    let mut ticks: u64 = 0;
    tracing::info!(%replica, "following background tasks");
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(TICK) => {}
        }
        ticks += 1;
        match book.rows.claim_due(&replica, lease_ms, BATCH).await {
            Ok(due) => {
                let polls = due.into_iter().map(|row| book.poll(&state, &replica, row));
                futures::future::join_all(polls).await;
            }
            Err(error) => tracing::warn!(%error, "looking for background tasks due"),
        }
        if ticks.is_multiple_of(20) {
            match book
                .rows
                .claim_unposted(&replica, UNPOSTED_AFTER_MS, lease_ms)
                .await
            {
                Ok(unposted) => {
                    for row in unposted {
                        tracing::warn!(task = %row.id, "posting a task's result that a replica claimed and never posted");
                        follow_up::post(&state, &book, row).await;
                    }
                }
                Err(error) => tracing::warn!(%error, "looking for task results never posted"),
            }
        }
    }
}

impl TaskBook {
    async fn poll(&self, state: &GatewayState, replica: &str, row: TaskRow) {
        let now = now_ms();
        if now >= row.give_up_at {
            let _ = self.hub.cancel_task(&row.server, &row.task_id).await;
            let waited = Duration::from_millis(
                u64::try_from(row.give_up_at - started_ms(&row)).unwrap_or(0),
            );
            let waited = match waited.as_secs() {
                s if s < 120 => format!("{s} s"),
                s => format!("{} min", s / 60),
            };
            let error = format!("gave up waiting for it after {waited} (MAITRED_TASK_GIVE_UP)");
            self.end(state, row, TaskStatus::Failed, None, Some(&error))
                .await;
            return;
        }
        if row.cancel_requested == 1 {
            match self.hub.cancel_task(&row.server, &row.task_id).await {
                Ok(()) => {
                    tracing::info!(task = %row.id, "asked the server to stop a task");
                    if let Err(error) = self.rows.cancel_sent(&row.id).await {
                        tracing::warn!(%error, "recording a task's cancel");
                    }
                }
                Err(HubError::TaskGone { .. }) => {}
                Err(error) => {
                    tracing::warn!(task = %row.id, %error, "asking the server to stop a task")
                }
            }
        }
        let polled = self.hub.task_state(&row.server, &row.task_id).await;
        let (status, status_message, interval, input) = match polled {
            Ok(TaskState::Working {
                status_message,
                poll_interval_ms,
            }) => (TaskStatus::Working, status_message, poll_interval_ms, None),
            Ok(TaskState::InputRequired {
                status_message,
                poll_interval_ms,
                key,
                request,
            }) => (
                TaskStatus::InputRequired,
                status_message,
                poll_interval_ms,
                Some(input_of(key, request)),
            ),
            Ok(TaskState::Completed(outcome)) => {
                let result = match outcome {
                    CallOutcome::Ok { text, .. } => {
                        maitred_llm::output::capped(text, self.output_cap)
                    }
                    CallOutcome::ToolError(text) => format!("Error: {text}"),
                    CallOutcome::Unavailable(reason) => format!("Error: {reason}"),
                    CallOutcome::Task(_) => "Error: the task's result was another task".to_owned(),
                };
                self.end(state, row, TaskStatus::Completed, Some(&result), None)
                    .await;
                return;
            }
            Ok(TaskState::Failed(error)) => {
                self.end(state, row, TaskStatus::Failed, None, Some(&error))
                    .await;
                return;
            }
            Ok(TaskState::Cancelled) => {
                self.end(state, row, TaskStatus::Cancelled, None, None)
                    .await;
                return;
            }
            Err(HubError::TaskGone { server, detail }) => {
                let error = format!(
                    "{server} no longer knows this task (it may have restarted, or let it expire): {detail}"
                );
                self.end(state, row, TaskStatus::Failed, None, Some(&error))
                    .await;
                return;
            }
            Err(error) => {
                let backoff =
                    (row.poll_interval_ms << row.failures.clamp(0, 6)).min(MAX_BACKOFF_MS);
                tracing::warn!(task = %row.id, server = %row.server, %error, backoff_ms = backoff, "a background task's server could not be asked");
                if let Err(error) = self.rows.unreachable(&row.id, replica, now + backoff).await {
                    tracing::warn!(%error, "recording a task's failed poll");
                }
                return;
            }
        };
        let interval = match interval {
            Some(asked) => poll_interval(Some(asked)),
            None => row.poll_interval_ms,
        };
        // A page that may not be shown (not https) never reaches the UI: the task is
        // told the person declined, as a call is, and asks nothing of them here.
        let (status, input) = match input {
            Some(asked)
                if asked
                    .url
                    .as_deref()
                    .is_some_and(|url| !self.hub.shows_url(url)) =>
            {
                tracing::warn!(task = %row.id, server = %row.server, "a task asked to open a page that is not https; declined");
                let declined = serde_json::json!({ "action": "decline" });
                if let Err(error) = self
                    .hub
                    .answer_task(&row.server, &row.task_id, &asked.key, declined)
                    .await
                {
                    tracing::warn!(task = %row.id, %error, "telling a task its page was declined");
                }
                (TaskStatus::Working, None)
            }
            other => (status, other),
        };
        let stored_input = input.as_ref().map(TaskInput::stored);
        let written = self
            .rows
            .polled(
                &row.id,
                replica,
                Polled {
                    status,
                    status_message: status_message.as_deref(),
                    input: stored_input.as_deref(),
                    poll_interval_ms: interval,
                    next_poll_at: now + interval,
                },
            )
            .await;
        if let Err(error) = written {
            tracing::warn!(%error, "recording a task's state");
        }
    }

    /// Records the end once; the replica that does posts the result.
    async fn end(
        &self,
        state: &GatewayState,
        mut row: TaskRow,
        status: TaskStatus,
        result: Option<&str>,
        error: Option<&str>,
    ) {
        let follow_up = MessageId::new();
        let ended = Ended {
            status,
            status_message: None,
            result,
            error,
        };
        match self.rows.ended(&row.id, ended, &follow_up).await {
            Ok(true) => {
                tracing::info!(task = %row.id, %status, "a background task ended");
                row.status = status;
                row.result = result.map(str::to_owned);
                row.error = error.map(str::to_owned);
                row.follow_up_message_id = Some(follow_up);
                follow_up::post(state, self, row).await;
            }
            // Another replica saw the end first, and posts it.
            Ok(false) => {}
            Err(error) => tracing::warn!(%error, "recording a task's end"),
        }
    }
}

fn started_ms(row: &TaskRow) -> i64 {
    maitred_core::db::parse_canonical(&row.created_at)
        .map_or(row.give_up_at, |at| at.timestamp_millis())
}

fn input_of(key: String, request: ElicitRequestParams) -> TaskInput {
    match request {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => TaskInput {
            key,
            message,
            schema: serde_json::to_value(requested_schema).ok(),
            url: None,
        },
        ElicitRequestParams::UrlElicitationParams { message, url, .. } => TaskInput {
            key,
            message,
            schema: None,
            url: Some(url),
        },
        other => TaskInput {
            key,
            message: format!("{other:?}"),
            schema: None,
            url: None,
        },
    }
}
