//! One question through the public chat API, as any client asks it: the SSE stream
//! read into the protocol crate's events until `done`. Write tools' approvals are
//! decided as the run was told; an answer that asks the person for input cannot be
//! answered by a run, so it is stopped and recorded as such.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;

use crate::protocol::events::{ChatEvent, Claim, ClaimStatus, Finish};
use crate::protocol::ids::CallStatus;
use crate::settings::API_PREFIX;

pub(super) struct Gateway {
    pub(super) http: reqwest::Client,
    pub(super) base: String,
    pub(super) token: String,
    pub(super) approve_writes: bool,
    pub(super) timeout: Duration,
}

/// What one answer's stream said.
#[derive(Debug, Default)]
pub(super) struct Answered {
    pub(super) model: String,
    pub(super) text: String,
    /// The tools called, in order (MCP names, without the server's prefix).
    pub(super) tools: Vec<String>,
    /// Calls whose result was not `ok`.
    pub(super) failed_calls: usize,
    pub(super) unsupported: Vec<String>,
    pub(super) first_token: Option<Duration>,
    pub(super) total: Duration,
    pub(super) prompt_tokens: u64,
    pub(super) completion_tokens: u64,
    pub(super) finish: Option<Finish>,
    pub(super) error: Option<String>,
}

impl Gateway {
    pub(super) async fn ask(&self, question: &str) -> anyhow::Result<Answered> {
        let started = Instant::now();
        let url = format!("{}{API_PREFIX}/stream/chat", self.base);
        let response = loop {
            let response = self
                .http
                .post(&url)
                .bearer_auth(&self.token)
                .json(&json!({ "question": question }))
                .send()
                .await
                .with_context(|| format!("asking at {url}"))?;
            let status = response.status();
            // The gateway's per-person question limit: a run waits its turn, as a
            // person would, for as long as it would wait for an answer.
            if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
                let wait = retry_after(&response);
                if started.elapsed() + wait < self.timeout {
                    tokio::time::sleep(wait).await;
                    continue;
                }
            }
            if !status.is_success() {
                let body = response.text().await.unwrap_or_default();
                bail!("asking at {url}: {status}: {body}");
            }
            break response;
        };
        // Waiting for the limit is not the model's time.
        let started = Instant::now();
        let mut frames = Frames::new(response);
        let mut answered = Answered::default();
        let mut message_id: Option<String> = None;
        loop {
            let left = self.timeout.saturating_sub(started.elapsed());
            let frame = match tokio::time::timeout(left, frames.next()).await {
                Ok(frame) => frame?,
                Err(_) => {
                    if let Some(id) = &message_id {
                        self.cancel(id).await;
                    }
                    answered.error = Some(format!("no answer within {:?}", self.timeout));
                    break;
                }
            };
            let Some((name, data)) = frame else {
                answered
                    .error
                    .get_or_insert_with(|| "the stream ended before done".into());
                break;
            };
            let event = match ChatEvent::from_frame(&name, &data) {
                Ok(event) => event,
                // An event this client does not know yet is not its business.
                Err(crate::protocol::events::BadFrame::UnknownEvent(_)) => continue,
                Err(error) => return Err(error).context("reading the answer's stream"),
            };
            match event {
                ChatEvent::Meta(meta) => {
                    message_id = Some(meta.message_id.to_string());
                    answered.model = meta.model;
                }
                ChatEvent::Token(token) => {
                    answered
                        .first_token
                        .get_or_insert_with(|| started.elapsed());
                    answered.text.push_str(&token.text);
                }
                ChatEvent::ToolCall(call) => answered.tools.push(call.tool),
                ChatEvent::ApprovalRequired(approval) => {
                    self.decide(approval.id.as_ref()).await?;
                }
                ChatEvent::InputRequired(_) => {
                    if let Some(id) = &message_id {
                        self.cancel(id).await;
                    }
                    answered.error = Some("the answer asked the person for input".into());
                }
                ChatEvent::ToolResult(result) if result.status != CallStatus::Ok => {
                    answered.failed_calls += 1;
                }
                ChatEvent::Grounding(grounding) => {
                    answered.unsupported = unsupported(&grounding.claims);
                }
                ChatEvent::Usage(usage) => {
                    answered.prompt_tokens += usage.prompt_tokens;
                    answered.completion_tokens += usage.completion_tokens;
                }
                ChatEvent::Error(error) => {
                    answered.error = Some(format!("{}: {}", error.code, error.message));
                }
                ChatEvent::Done(done) => {
                    answered.finish = Some(done.finish_reason);
                    break;
                }
                _ => {}
            }
        }
        answered.total = started.elapsed();
        Ok(answered)
    }

    async fn decide(&self, id: &str) -> anyhow::Result<()> {
        let url = format!("{}{API_PREFIX}/chat/approvals/{id}", self.base);
        let response = self
            .http
            .post(&url)
            .bearer_auth(&self.token)
            .json(&json!({ "approve": self.approve_writes }))
            .send()
            .await
            .with_context(|| format!("deciding an approval at {url}"))?;
        if !response.status().is_success() {
            bail!("deciding an approval at {url}: {}", response.status());
        }
        Ok(())
    }

    /// Best effort: the answer ends on the gateway's own grace period otherwise.
    async fn cancel(&self, message_id: &str) {
        let url = format!("{}{API_PREFIX}/chat/{message_id}/cancel", self.base);
        if let Err(error) = self.http.post(&url).bearer_auth(&self.token).send().await {
            tracing::warn!("cancelling {message_id}: {error}");
        }
    }
}

/// The wait a 429 asks for (whole seconds), at least a second and at most a minute.
fn retry_after(response: &reqwest::Response) -> Duration {
    let seconds = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(1);
    Duration::from_secs(seconds.clamp(1, 60))
}

fn unsupported(claims: &[Claim]) -> Vec<String> {
    claims
        .iter()
        .filter(|c| c.status == ClaimStatus::Unsupported)
        .map(|c| c.text.clone())
        .collect()
}

/// SSE frames (`event:` name and `data:`), comments skipped. Bytes are kept until a
/// frame ends, so a character split across chunks is whole when read.
struct Frames {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl Frames {
    fn new(response: reqwest::Response) -> Self {
        Self {
            response,
            buffer: Vec::new(),
        }
    }

    async fn next(&mut self) -> anyhow::Result<Option<(String, String)>> {
        loop {
            if let Some(end) = frame_end(&self.buffer) {
                let block: Vec<u8> = self.buffer.drain(..end).collect();
                let block = String::from_utf8_lossy(&block).replace("\r\n", "\n");
                let mut name = String::from("message");
                let mut data = Vec::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
                    }
                }
                if data.is_empty() {
                    continue;
                }
                return Ok(Some((name, data.join("\n"))));
            }
            match self
                .response
                .chunk()
                .await
                .context("reading the answer's stream")?
            {
                Some(bytes) => self.buffer.extend_from_slice(&bytes),
                None => return Ok(None),
            }
        }
    }
}

/// Where the first frame ends (after its blank line), if it has.
fn frame_end(buffer: &[u8]) -> Option<usize> {
    let lf = buffer.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
