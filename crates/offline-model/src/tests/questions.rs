//! The question tables of `testdata/resos` and `testdata/inventory`, planned and
//! answered offline: each question must call the expected tools with the expected
//! arguments, and, given the results recorded from the real servers for exactly those
//! calls, answer with the expected facts, in markdown, within a screen.

use chrono::NaiveDate;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{calls, text, with_results};
use crate::OfflineModel;
use maitred_llm::{ChatModel, ChatRequest, Message, ModelEvent, ToolCall, ToolDef};

const RESOS_TOOLS: &str = include_str!("../../testdata/tools.json");
const RESOS_QUESTIONS: &str = include_str!("../../testdata/resos/questions.json");
const RESOS_RESULTS: &str = include_str!("../../testdata/resos/results.json");
const INVENTORY_TOOLS: &str = include_str!("../../testdata/inventory/tools.json");
const INVENTORY_QUESTIONS: &str = include_str!("../../testdata/inventory/questions.json");
const INVENTORY_RESULTS: &str = include_str!("../../testdata/inventory/results.json");

/// The gateway's default cap on one tool result given to the model.
const OUTPUT_CAP: usize = maitred_core::settings::defaults::TOOL_OUTPUT_CAP;
/// An answer fits on a screen.
const MAX_ANSWER_LINES: usize = 25;
const MAX_ANSWER_CHARS: usize = 2500;

#[derive(Deserialize)]
struct Table {
    server: String,
    questions: Vec<Question>,
}

#[derive(Deserialize)]
struct Question {
    ask: String,
    calls: Vec<Expected>,
    #[serde(default)]
    facts: Vec<String>,
    #[serde(default)]
    absent: Vec<String>,
    #[serde(default)]
    absent_arguments: Vec<String>,
}

#[derive(Deserialize)]
struct Expected {
    tool: String,
    #[serde(default)]
    arguments: Map<String, Value>,
}

#[derive(Deserialize)]
struct Recorded {
    recorded_on: NaiveDate,
    answers: Vec<RecordedAnswer>,
}

#[derive(Deserialize)]
struct RecordedAnswer {
    ask: String,
    calls: Vec<RecordedCall>,
}

#[derive(Deserialize)]
struct RecordedCall {
    tool: String,
    arguments: Value,
    result: Option<Value>,
    error: Option<String>,
    text: Option<String>,
}

impl RecordedCall {
    /// The tool message as the gateway writes it for the model.
    fn content(&self) -> String {
        let content = match (&self.result, &self.error, &self.text) {
            (Some(result), _, _) => result.to_string(),
            (None, Some(error), _) => format!("Error: {error}"),
            (None, None, text) => text.clone().unwrap_or_default(),
        };
        // The gateway's output cap, as the tool pipeline applies it.
        maitred_llm::output::capped(content, OUTPUT_CAP)
    }
}

/// A server's `tools/list` as the gateway offers it to a model: `server__name`, the
/// title, the schema made self-contained, and the read-only hint.
fn offered(server: &str, listed: &str) -> Vec<ToolDef> {
    let tools: Vec<Value> = serde_json::from_str(listed).unwrap();
    tools
        .iter()
        .map(|tool| {
            let name = tool["name"].as_str().unwrap();
            ToolDef {
                name: format!("{server}__{name}"),
                title: tool["title"]
                    .as_str()
                    .or_else(|| tool["annotations"]["title"].as_str())
                    .map(str::to_owned),
                description: tool["description"].as_str().unwrap_or_default().to_owned(),
                parameters: maitred_llm::schema::for_model(&tool["inputSchema"]),
                read_only: tool["annotations"]["readOnlyHint"].as_bool() == Some(true),
            }
        })
        .collect()
}

fn resos_tools() -> Vec<ToolDef> {
    serde_json::from_str(RESOS_TOOLS).unwrap()
}

/// What one run of a table found.
#[derive(Default)]
struct Outcome {
    asked: usize,
    failures: Vec<String>,
    answer_chars: Vec<usize>,
    tools: std::collections::BTreeSet<String>,
}

async fn run(model: &OfflineModel, tools: &[ToolDef], messages: Vec<Message>) -> Vec<ModelEvent> {
    use futures::StreamExt;
    let request = ChatRequest {
        messages,
        tools: tools.to_vec(),
        ..ChatRequest::default()
    };
    model
        .stream(request)
        .await
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await
}

fn question(text: &str) -> Vec<Message> {
    vec![Message::User {
        content: text.to_owned(),
    }]
}

async fn check_table(questions: &str, results: &str, tools: &[ToolDef]) -> Outcome {
    let table: Table = serde_json::from_str(questions).unwrap();
    let recorded: Recorded = serde_json::from_str(results).unwrap();
    let model = OfflineModel::at(recorded.recorded_on);
    let mut outcome = Outcome::default();
    for q in &table.questions {
        outcome.asked += 1;
        let mut fail = |why: String| outcome.failures.push(format!("{:?}: {why}", q.ask));
        let planned = calls(&run(&model, tools, question(&q.ask)).await);
        if let Err(why) = expected_calls(&table.server, q, &planned) {
            fail(why.to_string());
            continue;
        }
        let Some(answer) = recorded.answers.iter().find(|a| a.ask == q.ask) else {
            fail("no recorded results: record them with check_offline_model.py --record".into());
            continue;
        };
        if let Err(why) = same_calls(&table.server, &answer.calls, &planned) {
            fail(why.to_string());
            continue;
        }
        let contents: Vec<String> = answer.calls.iter().map(RecordedCall::content).collect();
        let contents: Vec<&str> = contents.iter().map(String::as_str).collect();
        let messages = with_results(&q.ask, planned.clone(), &contents);
        let written = text(&run(&model, tools, messages).await);
        outcome.answer_chars.push(written.chars().count());
        outcome.tools.extend(planned.iter().map(|c| c.name.clone()));
        for why in answer_problems(q, &written) {
            outcome
                .failures
                .push(format!("{:?}: {why}\n{written}", q.ask));
        }
    }
    outcome
}

fn expected_calls(server: &str, q: &Question, planned: &[ToolCall]) -> anyhow::Result<()> {
    let made: Vec<String> = planned
        .iter()
        .map(|c| format!("{} {}", c.name, c.arguments))
        .collect();
    if planned.len() != q.calls.len() {
        anyhow::bail!("expected {} calls, made {made:?}", q.calls.len());
    }
    for (want, call) in q.calls.iter().zip(planned) {
        let arguments: Map<String, Value> = serde_json::from_str(&call.arguments).unwrap();
        let name = format!("{server}__{}", want.tool);
        let differs = want
            .arguments
            .iter()
            .any(|(k, v)| arguments.get(k) != Some(v));
        let extra = q.absent_arguments.iter().any(|k| arguments.contains_key(k));
        if call.name != name || differs || extra {
            anyhow::bail!(
                "expected {name} with {} (without {:?}), made {made:?}",
                Value::Object(want.arguments.clone()),
                q.absent_arguments
            );
        }
    }
    Ok(())
}

/// The recorded results answer exactly these calls, else they must be recorded again.
fn same_calls(server: &str, recorded: &[RecordedCall], planned: &[ToolCall]) -> anyhow::Result<()> {
    let same = recorded.len() == planned.len()
        && recorded.iter().zip(planned).all(|(r, p)| {
            let arguments: Value = serde_json::from_str(&p.arguments).unwrap();
            format!("{server}__{}", r.tool) == p.name && r.arguments == arguments
        });
    if same {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "the recorded results are for other calls: record them again"
        ))
    }
}

fn answer_problems(q: &Question, answer: &str) -> Vec<String> {
    let mut problems: Vec<String> = q
        .facts
        .iter()
        .filter(|fact| !answer.contains(fact.as_str()))
        .map(|fact| format!("the answer lacks {fact:?}"))
        .collect();
    problems.extend(
        q.absent
            .iter()
            .filter(|text| answer.contains(text.as_str()))
            .map(|text| format!("the answer shows {text:?}")),
    );
    if answer.contains("{\"") || answer.contains("\":") {
        problems.push("the answer shows raw JSON".to_owned());
    }
    let lines = answer.lines().count();
    if lines > MAX_ANSWER_LINES || answer.chars().count() > MAX_ANSWER_CHARS {
        problems.push(format!(
            "the answer is more than a screen: {lines} lines, {} chars",
            answer.chars().count()
        ));
    }
    problems
}

fn report(name: &str, outcome: &Outcome) {
    let chars = &outcome.answer_chars;
    let largest = chars.iter().max().copied().unwrap_or(0);
    let mean = chars.iter().sum::<usize>() / chars.len().max(1);
    eprintln!(
        "{name}: {} questions, {} passed; {} tools called; answers {mean} chars on average, {largest} at most",
        outcome.asked,
        outcome.asked - outcome.failures.len().min(outcome.asked),
        outcome.tools.len()
    );
}

#[tokio::test]
async fn a_restaurant_managers_questions_are_answered_from_the_resos_tools() {
    let tools = resos_tools();
    let outcome = check_table(RESOS_QUESTIONS, RESOS_RESULTS, &tools).await;
    report("resOS", &outcome);
    assert!(outcome.asked >= 40, "at least 40 questions");
    let unused: Vec<&str> = tools
        .iter()
        .map(|t| t.name.as_str())
        .filter(|name| !outcome.tools.contains(*name))
        .collect();
    assert!(unused.is_empty(), "every tool is asked about: {unused:?}");
    assert!(
        outcome.failures.is_empty(),
        "{}",
        outcome.failures.join("\n\n")
    );
}

#[tokio::test]
async fn a_third_party_servers_tools_are_chosen_and_filled_from_what_they_say() {
    let mut tools = resos_tools();
    tools.extend(offered("pantry", INVENTORY_TOOLS));
    let outcome = check_table(INVENTORY_QUESTIONS, INVENTORY_RESULTS, &tools).await;
    report("inventory", &outcome);
    assert!(outcome.asked >= 8);
    assert!(
        outcome.failures.is_empty(),
        "{}",
        outcome.failures.join("\n\n")
    );
}

#[tokio::test]
async fn a_server_that_marks_nothing_read_only_is_still_read() {
    let mut tools = resos_tools();
    tools.extend(
        offered("pantry", INVENTORY_TOOLS)
            .into_iter()
            .map(|t| ToolDef {
                read_only: false,
                ..t
            }),
    );
    let outcome = check_table(INVENTORY_QUESTIONS, INVENTORY_RESULTS, &tools).await;
    assert!(
        outcome.failures.is_empty(),
        "{}",
        outcome.failures.join("\n\n")
    );
}
