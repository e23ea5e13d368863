//! Tool search with 300 tools on 10 MCP servers: what the model reads per question
//! with every tool sent vs with tools deferred, and how often the search puts the
//! right tool first and among the five it returns.
//!
//! Ten scripted rmcp servers (`catalogue.txt`) run in-process; the gateway (every
//! role, as `maitred all` runs them) lists them as it would any server, and answers
//! each question of the routing set (`questions.txt`) on `/v1/chat/completions` with
//! the scripted upstream as its model: with every tool sent, the model calls the
//! question's tool and answers; deferred, it first searches in the person's own
//! words, then calls the tool and answers. Every request the upstream receives is
//! measured with the gateway's own estimate of a prompt (`maitred_llm::openai::
//! body_prompt_size`, the figures behind `tool_tokens` and
//! `gateway_prompt_tokens_estimated`), and the search's answer, as the model read
//! it, gives the rank of the right tool.
//!
//!     cargo bench --bench tool_search               # 160 questions, native and text mode
//!     cargo test --bench tool_search -- --quick     # 40 questions, native (CI)
//!     cargo bench --bench tool_search -- --text     # text mode only
//!     cargo bench --bench tool_search -- --search-only   # the ranking alone

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot run its questions has nothing to report: failing loudly is right"
)]
#![expect(clippy::print_stdout, reason = "a benchmark prints its tables")]
#![expect(
    clippy::disallowed_methods,
    reason = "the benchmark's own MCP servers, not request code"
)]

mod catalogue;
mod servers;

use std::time::{Duration, Instant};

use catalogue::Question;
use maitred::app::Role;
use maitred::settings::{LlmSettings, Settings, ToolCallMode, sqlite_url};
use maitred_llm::openai::body_prompt_size;
use maitred_scripted_llm::{Script, ScriptedLlm, ToolCallSpec, Turn};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The targets the figures are held to (the benchmark prints whether they are met;
/// with `--check`, it fails when one is not).
const TARGET_SAVING: f64 = 0.85;
const TARGET_TOP5: f64 = 0.95;

/// One run of the routing set through a gateway.
struct Run {
    /// Estimated input tokens of each question, all its model requests together.
    per_question: Vec<usize>,
    /// Of each question's first request: what the model reads before its first word.
    first_request: Vec<usize>,
    /// Of the tool definitions alone, in each question's first request.
    first_tools: Vec<usize>,
    /// Deferred: where the search put the question's tool (1-based), if among those
    /// it returned.
    ranks: Vec<Option<usize>>,
    /// Questions whose tool was called and answered `ok`.
    called_ok: usize,
    /// Every question's first request sent the same tools, byte for byte (in text
    /// mode: the same system prompt): a provider's prompt cache can hit.
    same_start: bool,
    elapsed: Duration,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let check = args.iter().any(|a| a == "--check");
    let servers = catalogue::servers();
    let mut questions = catalogue::questions();
    if quick {
        // Every fourth: tuning and held-out questions alike, every server.
        questions = questions.into_iter().step_by(4).collect();
    }
    // Five minutes, as a server of the 2026-07-28 revision may say.
    let served = servers::serve(&servers, 5 * 60 * 1000).await;
    let base = served.base.clone();
    let tools: usize = servers.iter().map(|s| s.tools.len()).sum();
    println!(
        "{tools} tools on {} MCP servers; {} questions ({} held out); machine: {} cores",
        servers.len(),
        questions.len(),
        questions.iter().filter(|q| q.held_out).count(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let text_only = args.iter().any(|a| a == "--text");
    let search_only = args.iter().any(|a| a == "--search-only");
    let modes: &[ToolCallMode] = if search_only {
        &[]
    } else if quick {
        &[ToolCallMode::Native]
    } else if text_only {
        &[ToolCallMode::Text]
    } else {
        &[ToolCallMode::Native, ToolCallMode::Text]
    };
    let mut met = true;
    println!();
    println!(
        "| tool calls | tools sent | input tokens per question (mean) | first request (mean) | of which tool definitions | same start every question | answered through the tool | time |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    // First the search alone, each question in its own words: where it puts each
    // question's tool. A model sees only what the search returns: when the tool is
    // not among them, it is not called.
    let probe = run(
        &base,
        &servers,
        &questions,
        ToolCallMode::Native,
        Kind::Search,
    )
    .await?;
    let ranks = probe.ranks.clone();
    for &mode in modes {
        let all = run(&base, &servers, &questions, mode, Kind::All).await?;
        let deferred = run(&base, &servers, &questions, mode, Kind::Deferred(&ranks)).await?;
        for (what, r) in [("all (300)", &all), ("deferred", &deferred)] {
            println!(
                "| {} | {what} | {:.0} | {:.0} | {:.0} | {} | {}/{} | {:.1} s |",
                mode_name(mode),
                mean(&r.per_question),
                mean(&r.first_request),
                mean(&r.first_tools),
                if r.same_start { "yes" } else { "no" },
                r.called_ok,
                questions.len(),
                r.elapsed.as_secs_f64()
            );
        }
        let saving = 1.0 - mean(&deferred.per_question) / mean(&all.per_question);
        let first_saving = 1.0 - mean(&deferred.first_request) / mean(&all.first_request);
        println!(
            "| {} | saved | {:.1} % | {:.1} % | | | | |",
            mode_name(mode),
            saving * 100.0,
            first_saving * 100.0
        );
        met &= saving >= TARGET_SAVING;
        met &= deferred.same_start;
    }

    println!();
    println!("| questions | count | top-1 | top-5 |");
    println!("|---|---|---|---|");
    for (what, keep) in [
        ("tuning half", Some(false)),
        ("held out", Some(true)),
        ("all", None),
    ] {
        let chosen: Vec<Option<usize>> = questions
            .iter()
            .zip(&ranks)
            .filter(|(q, _)| keep.is_none_or(|h| q.held_out == h))
            .map(|(_, r)| *r)
            .collect();
        let (top1, top5) = accuracy(&chosen);
        println!(
            "| {what} | {} | {:.1} % | {:.1} % |",
            chosen.len(),
            top1 * 100.0,
            top5 * 100.0
        );
        if keep.is_none() {
            met &= top5 >= TARGET_TOP5;
        }
    }
    println!();
    println!(
        "The MCP servers answered {} tool calls (one per question and run: searches never reach them) and {} tools/list requests (each gateway lists each server once; the listing stays fresh for its ttlMs).",
        served.calls.lock().map_or(0, |c| c.len()),
        served.lists.load(std::sync::atomic::Ordering::SeqCst)
    );
    let missed: Vec<&Question> = questions
        .iter()
        .zip(&ranks)
        .filter(|(_, r)| r.is_none())
        .map(|(q, _)| q)
        .collect();
    if !missed.is_empty() {
        println!();
        println!("Not in the top 5:");
        for question in missed {
            let half = if question.held_out {
                "held out"
            } else {
                "tuning"
            };
            println!("- {} ({half}): {}", question.tool, question.text);
        }
    }
    println!();
    println!(
        "targets (≥ {:.0} % fewer input tokens, right tool in the top 5 for ≥ {:.0} %): {}",
        TARGET_SAVING * 100.0,
        TARGET_TOP5 * 100.0,
        if met { "met" } else { "NOT met" }
    );
    if check && !met {
        anyhow::bail!("a target was not met");
    }
    Ok(())
}

/// What the model does with each question.
#[derive(Clone, Copy)]
enum Kind<'a> {
    /// Every tool is sent: it calls the question's tool, then answers.
    All,
    /// Tools are deferred: it searches in the question's words, then answers.
    Search,
    /// Tools are deferred: it searches, calls the question's tool if the search
    /// returned it (where it did: `ranks`), then answers.
    Deferred(&'a [Option<usize>]),
}

impl Kind<'_> {
    fn deferred(self) -> bool {
        !matches!(self, Kind::All)
    }

    /// Whether the model calls the `n`th question's tool.
    fn calls(self, n: usize) -> bool {
        match self {
            Kind::All => true,
            Kind::Search => false,
            Kind::Deferred(ranks) => ranks[n].is_some(),
        }
    }

    /// The model requests the `n`th question takes.
    fn requests(self, n: usize) -> usize {
        1 + usize::from(self.deferred()) + usize::from(self.calls(n))
    }
}

/// Every question through a gateway of its own, whose model speaks `mode`.
async fn run(
    base: &str,
    servers: &[catalogue::Server],
    questions: &[Question],
    mode: ToolCallMode,
    kind: Kind<'_>,
) -> anyhow::Result<Run> {
    let deferred = kind.deferred();
    let llm = ScriptedLlm::start(script(servers, questions, mode, kind)).await?;
    let dir = tempfile::tempdir()?;
    let mut settings = Settings::local(dir.path().to_owned(), sqlite_url(&dir.path().join("b.db")));
    settings.gateway.file.mcp_servers = servers
        .iter()
        .map(|s| servers::config(base, &s.name))
        .collect();
    if !deferred {
        settings.gateway.file.tool_search.defer_above = usize::MAX;
    }
    settings.gateway.file.limits.requests_per_minute = 100_000;
    settings.gateway.llm = Some(LlmSettings {
        base_url: llm.base_url(),
        api_key: Some("bench-key".into()),
        model: "scripted".into(),
        temperature: None,
        max_tokens: None,
        tool_calls: mode,
        profile: Default::default(),
    });
    let app = maitred::app::App::bind(settings, Role::ALL)
        .await?
        .start(CancellationToken::new())
        .await?;
    let settings = app.settings().clone();
    let http = maitred::http_client::new()?;
    let token = chat_token(&http, &settings).await?;
    let url = format!(
        "http://127.0.0.1:{}/v1/chat/completions",
        settings.gateway.endpoint.port
    );
    let started = Instant::now();
    let mut called_ok = 0;
    for (n, question) in questions.iter().enumerate() {
        let completion: Value = http
            .post(&url)
            .bearer_auth(&token)
            .json(&json!({
                "model": "maitred",
                "messages": [{ "role": "user", "content": question.text }],
            }))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let activity = completion["maitred"]["tool_activity"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let (server, tool) = question.tool.split_once("__").expect("server__tool");
        let ok = activity.iter().any(|a| {
            let result = &a["tool_result"];
            result["server"] == server && result["tool"] == tool && result["status"] == "ok"
        });
        if ok != kind.calls(n) {
            anyhow::bail!(
                "{} ({}): the call of {} went otherwise than scripted: {completion}",
                question.text,
                mode_name(mode),
                question.tool
            );
        }
        called_ok += usize::from(ok);
    }
    let elapsed = started.elapsed();
    let requests = llm.requests();
    let expected: usize = (0..questions.len()).map(|n| kind.requests(n)).sum();
    anyhow::ensure!(
        requests.len() == expected,
        "{} model requests for {} questions, not {expected}",
        requests.len(),
        questions.len()
    );
    let mut asked_all = Vec::new();
    let mut at = 0;
    for n in 0..questions.len() {
        asked_all.push(&requests[at..at + kind.requests(n)]);
        at += kind.requests(n);
    }
    let start = |body: &Value| match mode {
        ToolCallMode::Text => body["messages"][0].clone(),
        _ => body["tools"].clone(),
    };
    let mut result = Run {
        per_question: Vec::new(),
        first_request: Vec::new(),
        first_tools: Vec::new(),
        ranks: Vec::new(),
        called_ok,
        same_start: asked_all
            .iter()
            .all(|asked| start(&asked[0].body) == start(&requests[0].body)),
        elapsed,
    };
    for (question, asked) in questions.iter().zip(asked_all) {
        let sizes: Vec<_> = asked.iter().map(|r| body_prompt_size(&r.body)).collect();
        result
            .per_question
            .push(sizes.iter().map(|s| s.total()).sum());
        result.first_request.push(sizes[0].total());
        result.first_tools.push(match mode {
            // In text mode the definitions are in the system prompt: counted there.
            ToolCallMode::Text => text_tools(&asked[0].body),
            _ => sizes[0].tools,
        });
        if deferred {
            result.ranks.push(rank(&asked[1].body, &question.tool));
        }
    }
    app.stop().await;
    llm.stop().await;
    Ok(result)
}

/// The model's turns for every question, in order.
fn script(
    servers: &[catalogue::Server],
    questions: &[Question],
    mode: ToolCallMode,
    kind: Kind<'_>,
) -> Script {
    let mut turns = Vec::new();
    for (n, question) in questions.iter().enumerate() {
        let (server, name) = question.tool.split_once("__").expect("server__tool");
        let tool = servers
            .iter()
            .find(|s| s.name == server)
            .and_then(|s| s.tools.iter().find(|t| t.name == name))
            .expect("the question's tool is in the catalogue");
        if kind.deferred() {
            let query = json!({ "query": question.text });
            turns.push(call(mode, &format!("s{n}"), "search_tools", &query));
        }
        if kind.calls(n) {
            turns.push(call(
                mode,
                &format!("c{n}"),
                &question.tool,
                &catalogue::arguments(tool),
            ));
        }
        turns.push(Turn::text("Done."));
    }
    Script::new(turns)
}

/// A turn that calls `tool`: a `tool_calls` delta, or in text mode the call written
/// as Qwen and Hermes write it.
fn call(mode: ToolCallMode, id: &str, tool: &str, arguments: &Value) -> Turn {
    match mode {
        ToolCallMode::Text => Turn::text(format!(
            "<tool_call>\n{}\n</tool_call>",
            json!({ "name": tool, "arguments": arguments })
        )),
        _ => Turn::tool_calls([ToolCallSpec::new(id, tool, arguments.to_string())]),
    }
}

/// Where the search answer the model read in `body` (its last message) put `tool`.
fn rank(body: &Value, tool: &str) -> Option<usize> {
    let last = body["messages"].as_array()?.last()?;
    let answer = last["content"].as_str()?;
    answer
        .lines()
        .filter_map(|line| line.strip_prefix("- ")?.split_once(": "))
        .position(|(name, _)| name == tool)
        .map(|at| at + 1)
}

/// In text mode: the estimated tokens of the tool definitions written into the
/// system prompt (from its `# Tools` heading on).
fn text_tools(body: &Value) -> usize {
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    system
        .find("# Tools")
        .map_or(0, |at| maitred_llm::budget::estimate_tokens(&system[at..]))
}

fn accuracy(ranks: &[Option<usize>]) -> (f64, f64) {
    let n = ranks.len().max(1) as f64;
    let within = |k: usize| ranks.iter().filter(|r| r.is_some_and(|r| r <= k)).count() as f64;
    (within(1) / n, within(5) / n)
}

fn mean(values: &[usize]) -> f64 {
    values.iter().sum::<usize>() as f64 / values.len().max(1) as f64
}

fn mode_name(mode: ToolCallMode) -> &'static str {
    match mode {
        ToolCallMode::Text => "text",
        _ => "native",
    }
}

/// A chat token for the demo CLI client, as `maitred token` gets one.
async fn chat_token(http: &reqwest::Client, settings: &Settings) -> anyhow::Result<String> {
    let secret = maitred::identity::dev::DevCredentials::load(&settings.data_dir)?
        .client_secret("maitred-cli")
        .map(str::to_owned)
        .unwrap_or_default();
    let body: Value = http
        .post(format!(
            "{}/oauth2/token",
            settings.backend.endpoint.public_url
        ))
        .basic_auth("maitred-cli", Some(secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(body["access_token"].as_str().unwrap_or_default().to_owned())
}
