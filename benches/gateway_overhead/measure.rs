//! The client side: a stream straight from the upstream or through the gateway, when
//! each of its tokens arrived, and percentiles of those times.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Barrier;

pub(crate) const FRAGMENTS: usize = 64;

/// When each token of one stream arrived, counted from sending the request.
pub(crate) struct Timing {
    pub first: Duration,
    pub gaps: Vec<Duration>,
    pub tokens: usize,
}

/// Reads an SSE body, calling `on_event(event, data)` for each event; stops when it
/// returns false or the body ends.
pub(crate) async fn read_sse(
    response: reqwest::Response,
    mut on_event: impl FnMut(&str, &str) -> bool,
) -> anyhow::Result<()> {
    let mut body = response.bytes_stream();
    let mut buffer = Vec::new();
    while let Some(chunk) = body.next().await {
        buffer.extend_from_slice(&chunk?);
        while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = buffer.drain(..end + 2).collect();
            let text = std::str::from_utf8(&block)?;
            let (mut event, mut data) = ("message", String::new());
            for line in text.lines() {
                if let Some(name) = line.strip_prefix("event: ") {
                    event = name;
                } else if let Some(value) = line.strip_prefix("data: ") {
                    data.push_str(value);
                }
            }
            if !data.is_empty() && !on_event(event, &data) {
                return Ok(());
            }
        }
    }
    Ok(())
}

fn timing(started: Instant, arrivals: &[Instant]) -> Timing {
    Timing {
        first: arrivals.first().map_or(Duration::ZERO, |t| *t - started),
        gaps: arrivals.windows(2).map(|w| w[1] - w[0]).collect(),
        tokens: arrivals.len(),
    }
}

/// One stream straight from the upstream's chat completions.
pub(crate) async fn direct(http: reqwest::Client, upstream: String) -> anyhow::Result<Timing> {
    let started = Instant::now();
    let response = http
        .post(format!("{upstream}/chat/completions"))
        .json(&json!({
            "model": "scripted",
            "stream": true,
            "messages": [{"role": "user", "content": "Tell me about the restaurant."}],
        }))
        .send()
        .await?
        .error_for_status()?;
    let mut arrivals = Vec::with_capacity(FRAGMENTS);
    read_sse(response, |_, data| {
        if data == "[DONE]" {
            return false;
        }
        let chunk: Value = serde_json::from_str(data).unwrap_or(Value::Null);
        if chunk["choices"][0]["delta"]["content"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
        {
            arrivals.push(Instant::now());
        }
        true
    })
    .await?;
    Ok(timing(started, &arrivals))
}

/// One question through the gateway's chat endpoint.
pub(crate) async fn gateway(
    http: reqwest::Client,
    url: String,
    token: Arc<str>,
    question: &str,
) -> anyhow::Result<(Timing, Vec<Value>)> {
    let started = Instant::now();
    let response = http
        .post(format!("{url}/api/v1/resos/stream/chat"))
        .bearer_auth(&*token)
        .json(&json!({ "question": question }))
        .send()
        .await?
        .error_for_status()?;
    let mut arrivals = Vec::with_capacity(FRAGMENTS);
    let mut events = Vec::new();
    read_sse(response, |event, data| {
        if event == "token" {
            arrivals.push(Instant::now());
        } else {
            events.push(json!({ "event": event, "data": serde_json::from_str::<Value>(data).unwrap_or(Value::Null) }));
        }
        event != "done"
    })
    .await?;
    Ok((timing(started, &arrivals), events))
}

#[derive(Default)]
pub(crate) struct Samples {
    pub first: Vec<Duration>,
    pub gaps: Vec<Duration>,
    pub short: usize,
}

impl Samples {
    fn add(&mut self, timing: Timing) {
        if timing.tokens != FRAGMENTS {
            self.short += 1;
        }
        self.first.push(timing.first);
        self.gaps.extend(timing.gaps);
    }
}

pub(crate) fn percentile(values: &[Duration], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1000.0
}

/// Where the streams of a round go.
#[derive(Clone)]
pub(crate) enum Path {
    Upstream(String),
    Gateway { url: String, token: Arc<str> },
}

/// `concurrency` streams started at once on `path`, added to `samples`.
pub(crate) async fn round(
    http: &reqwest::Client,
    path: &Path,
    concurrency: usize,
    samples: &mut Samples,
) -> anyhow::Result<()> {
    let barrier = Arc::new(Barrier::new(concurrency));
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (http, path, barrier) = (http.clone(), path.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                match path {
                    Path::Upstream(upstream) => direct(http, upstream).await,
                    Path::Gateway { url, token } => {
                        let question = "Tell me about the restaurant.";
                        Ok(gateway(http, url, token, question).await?.0)
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        samples.add(task.await??);
    }
    Ok(())
}

/// Runs `rounds` rounds of `concurrency` streams on each path, the paths taking turns
/// so drift in the machine's load falls on both alike.
pub(crate) async fn compare(
    http: &reqwest::Client,
    upstream: &str,
    gateway_url: &str,
    token: &Arc<str>,
    concurrency: usize,
    rounds: usize,
) -> anyhow::Result<(Samples, Samples)> {
    let straight_path = Path::Upstream(upstream.to_owned());
    let through_path = Path::Gateway {
        url: gateway_url.to_owned(),
        token: token.clone(),
    };
    let (mut straight, mut through) = (Samples::default(), Samples::default());
    for _ in 0..rounds {
        round(http, &straight_path, concurrency, &mut straight).await?;
        round(http, &through_path, concurrency, &mut through).await?;
    }
    Ok((straight, through))
}

/// A table row of stream timings.
pub(crate) fn row(what: &str, concurrency: usize, samples: &Samples) -> String {
    format!(
        "| {what} | {concurrency} | {} | {:.2} | {:.2} | {:.2} | {:.2} |",
        samples.first.len(),
        percentile(&samples.first, 0.5),
        percentile(&samples.first, 0.99),
        percentile(&samples.gaps, 0.5),
        percentile(&samples.gaps, 0.99),
    )
}

/// The row of what `through` adds to `straight`, percentile by percentile.
pub(crate) fn added(
    what: &str,
    concurrency: usize,
    straight: &Samples,
    through: &Samples,
) -> String {
    let diff = |f: fn(&Samples) -> &Vec<Duration>, p| {
        percentile(f(through), p) - percentile(f(straight), p)
    };
    format!(
        "| {what} | {concurrency} | | {:+.2} | {:+.2} | {:+.2} | {:+.2} |",
        diff(|s| &s.first, 0.5),
        diff(|s| &s.first, 0.99),
        diff(|s| &s.gaps, 0.5),
        diff(|s| &s.gaps, 0.99),
    )
}
