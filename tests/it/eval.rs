//! `maitred eval` against a real `maitred all` answering with the offline model: the
//! report's shape, right and wrong judged as they are (truths the test counts itself
//! at the backend), tools judged, `--repeat`'s consistency, and the argument errors.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::helpers::Database;
use crate::on_both_databases;
use crate::process::{Maitred, Ports, free_port};

/// Lines the offline model answers right, one it answers wrong (a filter it does not
/// understand: it states the whole list's total), one whose expectation no answer
/// meets, and one that names a tool it does not call.
const QUESTIONS: &str = r#"{"id":"total","question":"How many customers do we have?","tools":["getCustomers"],"expect":{"count":{"resource":"customers"}}}
# a comment line, and a blank one

{"id":"loyal","question":"How many customers have more than 3 bookings?","tools":["getCustomers"],"expect":{"count":{"resource":"customers","customQuery":"bookingCount > 3"}}}
{"id":"once","question":"How many customers have booked exactly once?","tools":["getCustomers"],"expect":{"count":{"resource":"customers","customQuery":"bookingCount = 1"}}}
{"id":"by-id","question":"Who is customer 4e54787c3d6bcdcef8ff2c49?","tools":["getCustomerById"],"expect":{"contains":"sofia o'brien"}}
{"id":"never","question":"How many tables do we have?","tools":["getTables"],"expect":{"regex":"(?i)zebra"}}
{"id":"wrong-tool","question":"How many tables do we have?","tools":["getFeedback"],"expect":{"count":{"resource":"tables"}}}
"#;

on_both_databases!(eval_judges_a_real_gateway_and_writes_its_report);

async fn eval_judges_a_real_gateway_and_writes_its_report(db: &Database) {
    let data = tempfile::tempdir().unwrap();
    let ports = Ports::free();
    let mut env = ports.env();
    env.push(("DATABASE_URL", db.url(data.path()).await));
    let (backend, gateway) = (ports.backend_url(), ports.gateway_url());
    let maitred = Maitred::start(&["all"], data.path(), &env, &[&backend, &gateway]).await;
    let questions = data.path().join("questions.jsonl");
    std::fs::write(&questions, QUESTIONS).unwrap();
    let out = data.path().join("report");

    let run = eval(
        data.path(),
        &ports,
        &[
            "--url",
            &gateway,
            "--questions",
            questions.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--repeat",
            "2",
            "--model",
            "maitred-offline",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}\n{}", maitred.log());
    // A progress line per run, and the summary line.
    assert!(stderr.contains("[1/12] total: right"), "{stderr}");
    assert!(stderr.contains("[12/12] wrong-tool"), "{stderr}");
    assert!(stderr.contains("answers right"), "{stderr}");

    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["model"], "maitred-offline");
    assert_eq!(report["repeat"], 2);
    let by_id = |id: &str| {
        report["questions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["id"] == id)
            .unwrap_or_else(|| panic!("no {id} in {report:#}"))
            .clone()
    };
    // The truths are the backend's, counted as the test counts them itself.
    let token = maitred.token(&backend, "maitred-mcp").await;
    let count = |query: &'static str| {
        let (backend, token) = (backend.clone(), token.clone());
        async move {
            let response = maitred::http_client::new()
                .unwrap()
                .get(format!("{backend}/api/v1/resos/customers"))
                .bearer_auth(token)
                .query(&[("limit", "1"), ("customQuery", query)])
                .send()
                .await
                .unwrap();
            response.headers()["x-total-count"]
                .to_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        }
    };
    let loyal_truth = count("bookingCount > 3").await;
    let once_truth = count("bookingCount = 1").await;
    assert_ne!(loyal_truth, once_truth);

    let total = by_id("total");
    assert_eq!(total["right"], true, "{total:#}");
    assert_eq!(total["tools_called"], serde_json::json!(["getCustomers"]));
    assert_eq!(total["tool_right"], true);
    assert_eq!(total["runs"].as_array().unwrap().len(), 2);
    assert_eq!(total["consistency"]["right"], 2);
    assert!(
        total["answer"].as_str().unwrap().contains("60"),
        "{total:#}"
    );

    let loyal = by_id("loyal");
    assert_eq!(loyal["right"], true, "{loyal:#}");
    assert_eq!(loyal["runs"][0]["truth"], loyal_truth);
    assert!(
        loyal["answer"]
            .as_str()
            .unwrap()
            .contains(&loyal_truth.to_string())
    );

    // The offline model answers the total, not the filtered count: judged wrong.
    let once = by_id("once");
    assert_eq!(once["runs"][0]["truth"], once_truth);
    assert_eq!(once["right"], false, "{once:#}");
    assert_eq!(once["tool_right"], true);
    assert_eq!(once["consistency"]["right"], 0);
    assert_eq!(once["consistency"]["agreement"], 1.0);

    assert_eq!(by_id("by-id")["right"], true, "contains is case-blind");
    let never = by_id("never");
    assert_eq!(never["right"], false);
    assert!(never["answer"].as_str().unwrap().contains("20"));
    let wrong_tool = by_id("wrong-tool");
    assert_eq!(wrong_tool["right"], true);
    assert_eq!(wrong_tool["tool_right"], false);
    assert_eq!(
        wrong_tool["runs"][0]["missing_tools"],
        serde_json::json!(["getFeedback"])
    );

    let summary = &report["summary"];
    assert_eq!(summary["questions"], 6);
    assert_eq!(summary["runs"], 12);
    assert_eq!(summary["answer_right"], 8, "{summary:#}");
    assert_eq!(summary["tool_right"], 10);
    assert_eq!(summary["tool_expected"], 12);
    assert_eq!(summary["errors"], 0);
    let latency = &summary["total_ms"];
    assert!(latency["p50"].as_u64().unwrap() <= latency["p90"].as_u64().unwrap());
    assert!(latency["p90"].as_u64().unwrap() <= latency["max"].as_u64().unwrap());
    assert!(summary["first_token_ms"]["p50"].as_u64().is_some());
    assert!(summary["prompt_tokens"].as_u64().unwrap() > 0);
    for question in report["questions"].as_array().unwrap() {
        for field in [
            "answer",
            "right",
            "tools_called",
            "tool_right",
            "unsupported",
            "runs",
        ] {
            assert!(question.get(field).is_some(), "{field} in {question:#}");
        }
        let first = &question["runs"][0];
        for field in [
            "first_token_ms",
            "total_ms",
            "prompt_tokens",
            "completion_tokens",
        ] {
            assert!(first.get(field).is_some(), "{field} in {first:#}");
        }
    }
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(markdown.contains("maitred-offline"), "{markdown}");
    assert!(
        markdown.contains("| answers right | 8 of 12 |"),
        "{markdown}"
    );

    // A gateway answering with another model than the one asked for stops the run.
    let other = eval(
        data.path(),
        &ports,
        &[
            "--url",
            &gateway,
            "--questions",
            questions.to_str().unwrap(),
            "--out",
            data.path().join("other").to_str().unwrap(),
            "--model",
            "gpt-5",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert!(!other.status.success());
    assert!(
        stderr.contains("answers with maitred-offline, not gpt-5"),
        "{stderr}"
    );
}

/// Bad arguments and files are refused before anything is asked, each saying what is wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_refuses_bad_arguments_and_files_clearly() {
    let data = tempfile::tempdir().unwrap();
    let ports = Ports::free();
    let file = |name: &str, text: &str| {
        let path = data.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let good =
        r#"{"id":"a","question":"How many tables?","expect":{"count":{"resource":"tables"}}}"#;
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "--questions".into(),
                data.path().join("absent.jsonl").display().to_string(),
            ],
            "cannot read the questions file",
        ),
        (
            vec![
                "--questions".into(),
                file("bad.jsonl", &format!("{good}\n\n{{\"id\":\"b\"}}\n")),
            ],
            "line 3 is not a question",
        ),
        (
            vec![
                "--questions".into(),
                file(
                    "resource.jsonl",
                    r#"{"id":"a","question":"q","expect":{"count":{"resource":"cats"}}}"#,
                ),
            ],
            "expect.count.resource \"cats\"",
        ),
        (
            vec![
                "--questions".into(),
                file("twice.jsonl", &format!("{good}\n{good}\n")),
            ],
            "line 2: the id \"a\" is used twice",
        ),
        (
            vec![
                "--questions".into(),
                file(
                    "regex.jsonl",
                    r#"{"id":"a","question":"q","expect":{"regex":"("}}"#,
                ),
            ],
            "is not a regular expression",
        ),
        (
            vec!["--questions".into(), file("empty.jsonl", "\n# nothing\n")],
            "no questions",
        ),
        (vec!["--repeat".into(), "0".into()], "--repeat"),
        (vec!["--url".into(), "not a url".into()], "is not a URL"),
        (
            vec![
                "--questions".into(),
                file("one.jsonl", good),
                "--url".into(),
                format!("http://127.0.0.1:{}", free_port()),
            ],
            "cannot reach the gateway",
        ),
    ];
    for (args, expected) in cases {
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = data.path().join("out");
        args.extend(["--out", out.to_str().unwrap()]);
        let run = eval(data.path(), &ports, &args).await;
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success(), "{args:?} succeeded");
        assert!(
            stderr.contains(expected),
            "{args:?}: {expected:?} not in {stderr}"
        );
    }
}

/// `maitred eval <args>` run to its end, with the dev credentials of `data`.
async fn eval(data: &Path, ports: &Ports, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_maitred"))
        .arg("eval")
        .args(args)
        .env_remove("DATABASE_URL")
        .env("MAITRED_DATA_DIR", data)
        .envs(ports.env())
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap()
}

/// The built-in set asks for every tool the MCP server offers, and for no other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_in_set_covers_every_tool_the_mcp_server_offers() {
    let app = crate::helpers::TestApp::spawn(&Database::Sqlite).await;
    let token = app.token("maitred-gateway", &[]).await;
    let client = crate::mcp::connect(&app, &token, crate::mcp::MODERN).await;
    let offered: std::collections::BTreeSet<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    let built_in = include_str!("../../src/eval/builtin.jsonl");
    let mut asked = std::collections::BTreeSet::new();
    let mut questions = 0;
    for line in built_in.lines().filter(|l| l.starts_with('{')) {
        let question: Value = serde_json::from_str(line).unwrap();
        questions += 1;
        for tool in question["tools"].as_array().unwrap() {
            asked.insert(tool.as_str().unwrap().to_owned());
        }
    }
    assert!(questions >= 40, "{questions} questions");
    assert!(offered.len() >= 16, "{offered:?}");
    assert_eq!(asked, offered);
}

/// With the scripted upstream: a misread count and an invented figure are judged wrong
/// and reported as unsupported (from the answer's `grounding` event), an answer that
/// only echoes the question's figure is not right even when it is the true one, and a run killed
/// in the middle of an answer keeps the report of every answer before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misread_answer_is_wrong_and_a_killed_run_keeps_its_report() {
    use maitred_scripted_llm::{Script, ScriptedLlm, ToolCallSpec, Turn};
    let llm = ScriptedLlm::start(Script::new([
        Turn::tool_calls([ToolCallSpec::new(
            "call_1",
            "resos__getCustomers",
            r#"{"limit":2}"#,
        )]),
        Turn::text("We have 40 customers, and 7 of them booked this week."),
        // States only the question's own figure, which is also the true count.
        Turn::text("Several tables seat 6 or more guests."),
        // Long enough to be killed in.
        Turn::text_fragments((0..600).map(|i| format!("w{i} ")))
            .paced(std::time::Duration::from_millis(100)),
    ]))
    .await
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let ports = Ports::free();
    let mut env = ports.env();
    env.extend([
        ("MAITRED_LLM_BASE_URL", llm.base_url()),
        ("MAITRED_LLM_MODEL", "scripted".to_owned()),
    ]);
    let (backend, gateway) = (ports.backend_url(), ports.gateway_url());
    let maitred = Maitred::start(&["all"], data.path(), &env, &[&backend, &gateway]).await;
    let questions = data.path().join("questions.jsonl");
    std::fs::write(
        &questions,
        concat!(
            r#"{"id":"customers","question":"How many customers do we have?","tools":["getCustomers"],"expect":{"count":{"resource":"customers"}}}"#,
            "\n",
            r#"{"id":"echo","question":"How many tables seat 6 or more guests?","expect":{"count":{"resource":"tables","customQuery":"seatsMax >= 6"}}}"#,
            "\n",
            r#"{"id":"long","question":"Talk a long while","expect":{"contains":"w599"}}"#,
            "\n"
        ),
    )
    .unwrap();
    let out = data.path().join("report");
    let mut run = tokio::process::Command::new(env!("CARGO_BIN_EXE_maitred"))
        .args(["eval", "--url", &gateway, "--out", out.to_str().unwrap()])
        .arg("--questions")
        .arg(&questions)
        .env_remove("DATABASE_URL")
        .env("MAITRED_DATA_DIR", data.path())
        .envs(ports.env())
        .env("RUST_LOG", "warn")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The first answer's report, then the second answer streaming: kill the run then.
    let report_file = out.join("report.json");
    let mut report = Value::Null;
    for _ in 0..400 {
        if let Ok(text) = std::fs::read_to_string(&report_file) {
            report = serde_json::from_str(&text).unwrap();
            if report["questions"].as_array().unwrap().len() == 2 {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        report["questions"].as_array().map(Vec::len),
        Some(2),
        "{report:#}\n{}",
        maitred.log()
    );
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(run.try_wait().unwrap().is_none(), "the run ended early");
    run.kill().await.unwrap();
    let kept: Value =
        serde_json::from_str(&std::fs::read_to_string(&report_file).unwrap()).unwrap();
    assert_eq!(kept, report, "written after the second answer, not since");
    assert_eq!(kept["model"], "scripted");
    let answered = kept["questions"].as_array().unwrap();
    assert_eq!(answered.len(), 2, "{kept:#}");
    let echo = &answered[1];
    assert_eq!(echo["runs"][0]["truth"], 6, "{echo:#}");
    assert_eq!(
        echo["right"], false,
        "echoing the question's 6 is no answer"
    );
    let first = &answered[0];
    assert_eq!(first["runs"][0]["truth"], 60);
    assert_eq!(first["right"], false, "40 is not the 60 the backend counts");
    assert_eq!(first["tool_right"], true);
    assert_eq!(
        first["unsupported"],
        serde_json::json!(["40", "7"]),
        "{first:#}"
    );
    assert_eq!(kept["summary"]["unsupported_figures"], 2);
    assert_eq!(kept["summary"]["answers_with_unsupported"], 1);
    assert!(
        std::fs::read_to_string(out.join("report.md"))
            .unwrap()
            .contains("| 40, 7 |")
    );
}

/// A write tool's approval is approved by default (the booking is made) and denied with
/// `--deny-writes` (no booking).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_approvals_are_approved_unless_denied() {
    let data = tempfile::tempdir().unwrap();
    let ports = Ports::free();
    let (backend, gateway) = (ports.backend_url(), ports.gateway_url());
    let maitred = Maitred::start(&["all"], data.path(), &ports.env(), &[&backend, &gateway]).await;
    let token = maitred.token(&backend, "maitred-mcp").await;
    // Writes are a person's with a writing role: the default chat client only reads.
    let credentials = maitred::identity::dev::DevCredentials::load(data.path()).unwrap();
    let operator = crate::token_exchange::person_tokens_at(
        &reqwest::Client::new(),
        &backend,
        // The web client's redirect, at the gateway's default public URL.
        &format!(
            "{}/login/callback",
            gateway.replace("127.0.0.1", "localhost")
        ),
        "operator",
        &credentials.users["operator"].password,
        "openid profile chat.read chat.write",
    )
    .await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let bookings_of = |guest: &'static str| {
        let (backend, token) = (backend.clone(), token.clone());
        async move {
            let response = maitred::http_client::new()
                .unwrap()
                .get(format!("{backend}/api/v1/resos/bookings"))
                .bearer_auth(token)
                .query(&[
                    ("limit", "1"),
                    ("customQuery", &format!("guest.name = '{guest}'")),
                ])
                .send()
                .await
                .unwrap();
            response.headers()["x-total-count"]
                .to_str()
                .unwrap()
                .to_owned()
        }
    };
    for (guest, deny) in [("Denied Dora", true), ("Approved Abe", false)] {
        let email = guest.to_lowercase().replace(' ', ".");
        let questions = data.path().join(format!("{email}.jsonl"));
        let line = serde_json::json!({
            "id": "book",
            "question": format!("Book a table for 2 people on {{today+5}} at 19:00 for {guest}, email {email}@example.com, phone +4520000002."),
            "tools": ["createBooking"],
            "expect": {"regex": "went through"},
        });
        std::fs::write(&questions, line.to_string()).unwrap();
        let out = data.path().join(&email);
        let mut args = vec![
            "--url",
            &gateway,
            "--questions",
            questions.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--token",
            &operator,
        ];
        if deny {
            args.push("--deny-writes");
        }
        let run = eval(data.path(), &ports, &args).await;
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap())
                .unwrap();
        let question = &report["questions"][0];
        assert_eq!(
            question["tools_called"],
            serde_json::json!(["createBooking"])
        );
        assert_eq!(question["right"], !deny, "{question:#}");
        assert_eq!(bookings_of(guest).await, if deny { "0" } else { "1" });
    }
}
