//! maitred follows tasks of an MCP server we did not write: the published
//! `fastmcp-tasks` (FastMCP's implementation of the Tasks extension), serving
//! `tests/mcp-clients/tasks-server/server.py`. `scripts/check-mcp-clients` starts it
//! and runs this with its URL in `MAITRED_THIRD_PARTY_TASKS_URL`.

use std::time::Duration;

use maitred_scripted_llm::{Script, ToolCallSpec, Turn};
use serde_json::{Value, json};

use crate::helpers::{Database, Llm, TestApp, answer, of};

fn turns(tool: &str, arguments: Value, then: &str) -> [Turn; 3] {
    [
        Turn::tool_calls([ToolCallSpec::new(
            format!("call_{tool}"),
            format!("fm__{tool}"),
            arguments.to_string(),
        )]),
        Turn::text("It runs in the background."),
        Turn::text(then),
    ]
}

async fn tasks_of(app: &TestApp, token: &str, conversation: &str) -> Value {
    app.gateway_get(
        &format!("/api/v1/resos/conversations/{conversation}/tasks"),
        token,
    )
    .await
    .json::<Value>()
    .await
    .unwrap()["tasks"][0]
        .clone()
}

/// Polls the conversation's task until `done`; every status message seen.
async fn until(
    app: &TestApp,
    token: &str,
    conversation: &str,
    done: impl Fn(&Value) -> bool,
) -> (Value, Vec<String>) {
    let mut messages = Vec::new();
    for _ in 0..600 {
        let task = tasks_of(app, token, conversation).await;
        if let Some(message) = task["status_message"].as_str()
            && messages.last() != Some(&message.to_owned())
        {
            messages.push(message.to_owned());
        }
        if done(&task) {
            return (task, messages);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the task did not get there: {messages:?}");
}

async fn ask(app: &TestApp, token: &str, question: &str) -> String {
    let events = app.ask(token, question, None).await.rest().await;
    assert_eq!(of(&events, "tool_result")[0]["status"], "ok", "{events:?}");
    of(&events, "meta")[0]["conversation_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn follow_up(app: &TestApp, token: &str, task: &Value) -> String {
    let id = task["follow_up_message_id"].as_str().unwrap();
    answer(&app.watch(token, id, None).await.rest().await)
}

#[tokio::test]
#[ignore = "needs the fastmcp-tasks server: run by scripts/check-mcp-clients"]
async fn maitred_follows_the_tasks_of_a_server_we_did_not_write() {
    let Ok(url) = std::env::var("MAITRED_THIRD_PARTY_TASKS_URL") else {
        eprintln!("MAITRED_THIRD_PARTY_TASKS_URL is not set: skipped");
        return;
    };
    let script = Script::new(
        [
            turns("slow_count", json!({"n": 12}), "Counted to twelve."),
            turns("never_ends", json!({}), "It was stopped."),
            turns("needs_name", json!({}), "It greeted Ada."),
        ]
        .into_iter()
        .flatten(),
    );
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        s.gateway.file.mcp_servers = vec![
            serde_json::from_value(json!({
                "name": "fm", "url": url, "timeout": 10,
                "read_only_tools": ["*"], "auth": {"type": "none"},
            }))
            .unwrap(),
        ];
    })
    .await;
    let token = app.chat_token().await;
    let llm = app.llm.as_ref().unwrap();

    // A task that counts, with a status message per step, and its result posted (the
    // server asks to be polled every 5 s: 12 steps of 0.5 s show one or two).
    let conversation = ask(&app, &token, "Count to twelve").await;
    let (task, messages) = until(&app, &token, &conversation, |t| {
        t["follow_up_message_id"].is_string()
    })
    .await;
    assert_eq!(task["status"], "completed", "{task}");
    assert!(
        messages.iter().any(|m| m.starts_with("Counted ")),
        "{messages:?}"
    );
    assert_eq!(follow_up(&app, &token, &task).await, "Counted to twelve.");
    let told = llm.requests().last().unwrap().body["messages"].to_string();
    assert!(told.contains(r#"{\"result\":12}"#), "{told}");

    // Stop reaches the server: it lists the task among those it saw cancelled.
    let conversation = ask(&app, &token, "Never end").await;
    let (task, _) = until(&app, &token, &conversation, |t| {
        t["status_message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Still working"))
    })
    .await;
    let id = task["id"].as_str().unwrap();
    let stopped = app
        .gateway_post(
            &format!("/api/v1/resos/chat/tasks/{id}/cancel"),
            &token,
            &json!({}),
        )
        .await;
    assert_eq!(stopped.status(), 202);
    let (task, _) = until(&app, &token, &conversation, |t| {
        t["follow_up_message_id"].is_string()
    })
    .await;
    assert_eq!(task["status"], "cancelled", "{task}");
    assert_eq!(follow_up(&app, &token, &task).await, "It was stopped.");
    let (server_id,): (String,) = sqlx::query_as("SELECT task_id FROM tool_tasks WHERE id = $1")
        .bind(id)
        .fetch_one(app.db.pool())
        .await
        .unwrap();
    let base = url.trim_end_matches("/mcp");
    let cancelled: Value = reqwest::get(format!("{base}/cancelled"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        cancelled["cancelled"]
            .as_array()
            .unwrap()
            .contains(&json!(server_id)),
        "{cancelled}"
    );

    // A question of the task's, answered through the API, under the server's own key.
    let conversation = ask(&app, &token, "Greet someone").await;
    let (task, _) = until(&app, &token, &conversation, |t| {
        t["status"] == "input_required"
    })
    .await;
    assert!(
        task["input"]["schema"]["properties"]["name"].is_object(),
        "{task}"
    );
    let id = task["id"].as_str().unwrap();
    let answered = app
        .gateway_post(
            &format!("/api/v1/resos/chat/tasks/{id}/input"),
            &token,
            &json!({"action": "accept", "content": {"name": "Ada"}}),
        )
        .await;
    assert_eq!(answered.status(), 202, "{:?}", answered.text().await);
    let (task, _) = until(&app, &token, &conversation, |t| {
        t["follow_up_message_id"].is_string()
    })
    .await;
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(follow_up(&app, &token, &task).await, "It greeted Ada.");
    let told = llm.requests().last().unwrap().body["messages"].to_string();
    assert!(told.contains("Hello, Ada!"), "{told}");
    app.stop().await;
}
