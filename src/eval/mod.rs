//! `maitred eval`: measure the model a running maitred answers with. Each question goes
//! through the public chat API like any client's; the answer is judged against a truth
//! counted from the backend at run time (or a fixed text or pattern), its tools against
//! the expected ones, and its unsupported figures read from its `grounding` event. The
//! report is rewritten after every answer. The format is docs/eval.md's.

mod ask;
mod questions;
mod report;
mod truth;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::app::client_token;
use crate::cli::EvalCommand;
use crate::http_client;
use ask::{Answered, Gateway};
use questions::{Expect, Question};
use report::{QuestionReport, Report, Run};
use truth::Backend;

pub async fn run(args: &EvalCommand) -> anyhow::Result<()> {
    // Everything that can be wrong with the arguments is said before anything is asked.
    let questions = questions::load(args.questions.as_deref())?;
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "eval-{}",
            chrono::Local::now().format("%Y%m%d-%H%M%S")
        ))
    });
    std::fs::create_dir_all(&out)
        .with_context(|| format!("cannot create the report directory {}", out.display()))?;
    let base = args
        .url
        .clone()
        .unwrap_or_else(|| format!("http://localhost:{}", args.gateway_port));
    let base = url::Url::parse(&base)
        .with_context(|| format!("--url {base:?} is not a URL"))?
        .as_str()
        .trim_end_matches('/')
        .to_owned();
    let http = http_client::new()?;
    let ready = format!("{base}/readyz");
    match http.get(&ready).send().await {
        Ok(response) if response.status().is_success() => {}
        Ok(response) => bail!("the gateway at {base} is not ready: {}", response.status()),
        Err(error) => bail!("cannot reach the gateway at {base} (is maitred running?): {error}"),
    }
    let token = match &args.token {
        Some(token) => token.clone(),
        None => client_token(&args.data_dir, &args.issuer, &args.client, None, None, None)
            .await
            .with_context(|| {
                format!("getting a chat token for {} (or pass --token)", args.client)
            })?,
    };
    let backend = Backend {
        http: http.clone(),
        base: args
            .issuer
            .backend_url
            .clone()
            .unwrap_or_else(|| format!("http://localhost:{}", args.issuer.backend_port))
            .trim_end_matches('/')
            .to_owned(),
        token: match &args.backend_token {
            Some(token) => token.clone(),
            None => client_token(
                &args.data_dir,
                &args.issuer,
                &args.backend_client,
                None,
                None,
                None,
            )
            .await
            .with_context(|| {
                format!(
                    "getting a backend token for {} (or pass --backend-token)",
                    args.backend_client
                )
            })?,
        },
    };
    let gateway = Gateway {
        http,
        base: base.clone(),
        token,
        approve_writes: !args.deny_writes,
        timeout: args.timeout.0,
    };
    let mut report = Report {
        model: String::new(),
        gateway: base,
        started_at: chrono::Local::now().to_rfc3339(),
        repeat: args.repeat,
        summary: report::Summary::default(),
        questions: Vec::new(),
    };
    let runs = questions.len() * args.repeat as usize;
    let mut done = 0;
    for question in &questions {
        report.questions.push(QuestionReport {
            id: question.id.clone(),
            question: truth::dates(&question.question)?,
            expect: expect_json(&question.expect),
            expected_tools: question.tools.clone(),
            answer: String::new(),
            right: false,
            tools_called: Vec::new(),
            tool_right: None,
            unsupported: Vec::new(),
            runs: Vec::new(),
            consistency: None,
        });
        for _ in 0..args.repeat {
            let (model, run) = ask_one(&gateway, &backend, question).await?;
            if let Some(wanted) = &args.model
                && !model.is_empty()
                && &model != wanted
            {
                bail!(
                    "the gateway answers with {model}, not {wanted}: its configuration chooses the model (MAITRED_LLM_MODEL)"
                );
            }
            if report.model.is_empty() {
                report.model = model;
            }
            done += 1;
            eprintln!("{}", progress(done, runs, question, &run));
            if let Some(last) = report.questions.last_mut() {
                last.add(run);
            }
            report.write(&out)?;
        }
    }
    let s = &report.summary;
    eprintln!(
        "{}: {} of {} answers right, tools right {} of {}, {} unsupported figures; report in {}",
        report.model,
        s.answer_right,
        s.runs,
        s.tool_right,
        s.tool_expected,
        s.unsupported_figures,
        out.display()
    );
    Ok(())
}

/// One run of a question: the truth counted just before it is asked.
async fn ask_one(
    gateway: &Gateway,
    backend: &Backend,
    question: &Question,
) -> anyhow::Result<(String, Run)> {
    let truth = match &question.expect {
        Expect::Count(count) => Some(backend.count(count).await.map_err(|e| format!("{e:#}"))),
        _ => None,
    };
    // Checked when the questions were read, so the dates are there to write.
    let dated = |text: &str| truth::dates(text).unwrap_or_else(|_| text.to_owned());
    // A question the gateway refused is recorded, and the run goes on.
    let asked = dated(&question.question);
    let answered = gateway.ask(&asked).await.unwrap_or_else(|e| Answered {
        error: Some(format!("{e:#}")),
        ..Answered::default()
    });
    let mut error = answered.error.clone();
    let right = match (&question.expect, &truth) {
        // The true figure must be the answer's own, not only the question's echoed
        // ("How many tables seat 6 or more?" is not answered by "6 or more").
        (Expect::Count(_), Some(Ok(n))) => {
            crate::gateway::times_stated(&answered.text, *n as f64)
                > crate::gateway::times_stated(&asked, *n as f64)
        }
        (Expect::Count(_), Some(Err(why))) => {
            error = Some(format!("the truth could not be counted: {why}"));
            false
        }
        (Expect::Contains(text), _) => answered
            .text
            .to_lowercase()
            .contains(&dated(text).to_lowercase()),
        (Expect::Regex(pattern), _) => regex::Regex::new(&dated(pattern))
            .map(|r| r.is_match(&answered.text))
            .unwrap_or(false),
        (Expect::Count(_), None) => false,
    } && finished(&answered);
    let missing_tools: Vec<String> = question
        .tools
        .iter()
        .filter(|t| !answered.tools.contains(t))
        .cloned()
        .collect();
    let run = Run {
        right,
        truth: truth.and_then(Result::ok),
        tool_right: (!question.tools.is_empty()).then_some(missing_tools.is_empty()),
        missing_tools,
        tools_called: answered.tools.clone(),
        unsupported: answered.unsupported.clone(),
        failed_calls: answered.failed_calls,
        first_token_ms: answered.first_token.map(millis),
        total_ms: millis(answered.total),
        prompt_tokens: answered.prompt_tokens,
        completion_tokens: answered.completion_tokens,
        finish: answered.finish.as_ref().map(|f| {
            serde_json::to_value(f)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        }),
        error,
        answer: answered.text,
    };
    Ok((answered.model, run))
}

/// An answer that did not end by itself is not judged right, whatever it said so far.
fn finished(answered: &Answered) -> bool {
    answered.error.is_none() && answered.finish == Some(crate::protocol::events::Finish::Stop)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn expect_json(expect: &Expect) -> serde_json::Value {
    match expect {
        Expect::Count(count) => serde_json::json!({ "count": {
            "resource": count.resource,
            "customQuery": count.custom_query,
            "params": count.params,
        }}),
        Expect::Contains(text) => serde_json::json!({ "contains": text }),
        Expect::Regex(pattern) => serde_json::json!({ "regex": pattern }),
    }
}

fn progress(done: usize, runs: usize, question: &Question, run: &Run) -> String {
    let verdict = if run.right { "right" } else { "wrong" };
    let tools = match run.tool_right {
        Some(true) => "tools right",
        Some(false) => "tools wrong",
        None => "tools not judged",
    };
    let truth = run
        .truth
        .map(|n| format!(" (truth {n})"))
        .unwrap_or_default();
    let error = run
        .error
        .as_deref()
        .map(|e| format!(" [{e}]"))
        .unwrap_or_default();
    format!(
        "[{done}/{runs}] {}: {verdict}{truth}, {tools}, {} unsupported, {:.1} s{error}",
        question.id,
        run.unsupported.len(),
        run.total_ms as f64 / 1000.0
    )
}
