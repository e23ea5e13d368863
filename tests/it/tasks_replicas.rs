//! A background task outlives the replica that follows it: three gateways behind
//! nginx, on PostgreSQL and Redis; the one holding the task's lease is killed
//! (`kill -9`) mid-task, and another takes the task over, sees it end and posts its
//! result once.

use std::time::{Duration, Instant};

use maitred_scripted_llm::ScriptedLlm;
use serde_json::{Value, json};

use crate::helpers::{SseReader, answer, of};
use crate::process::ask;
use crate::replicas::cluster_with;
use crate::tasks::{lab, script};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs nginx, redis-server and PostgreSQL: run by scripts/check-replicas"]
async fn the_replica_following_a_task_is_killed_and_another_finishes_it() {
    let (lab_url, seen) = lab(Duration::from_millis(400)).await;
    let llm = ScriptedLlm::start(script("crunch", json!({"steps": 20}), "Crunched 20."))
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let toml = format!(
        "[limits]\nconcurrent_generations = 5\nrequests_per_minute = 600\n\n\
         [[mcp_servers]]\nname = \"lab\"\nurl = \"{lab_url}\"\ntimeout = 5\nread_only_tools = [\"*\"]\n"
    );
    let mut cluster = cluster_with(&llm, data.path(), &toml, &[]).await;
    let gateway = cluster.nginx.gateway.clone();
    let events = ask(&cluster.http, &gateway, &cluster.token, "Crunch twenty")
        .await
        .rest()
        .await;
    assert_eq!(
        of(&events, "done")[0]["finish_reason"],
        "stop",
        "{events:?}"
    );
    let conversation = of(&events, "meta")[0]["conversation_id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Whoever follows it now, mid-way.
    let deadline = Instant::now() + Duration::from_secs(20);
    let owner = loop {
        let row: Option<(Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT lease_owner, status_message FROM tool_tasks WHERE conversation_id = $1",
        )
        .bind(&conversation)
        .fetch_optional(cluster.db.pool())
        .await
        .unwrap();
        if let Some((Some(owner), Some(message))) = row
            && message.starts_with("step ")
        {
            break owner;
        }
        assert!(Instant::now() < deadline, "nobody follows the task");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let victim = cluster
        .gateways
        .iter()
        .position(|g| g.log().contains(&owner))
        .expect("the owner's log names it");
    cluster.gateways[victim].kill();
    let killed_at = Instant::now();
    println!("killed gateway {victim} ({owner}) while it followed the task");

    let deadline = Instant::now() + Duration::from_secs(40);
    let task = loop {
        let response = cluster
            .http
            .get(format!(
                "{gateway}/api/v1/resos/conversations/{conversation}/tasks"
            ))
            .bearer_auth(&cluster.token)
            .send()
            .await
            .unwrap();
        let list: Value = response.json().await.unwrap();
        let task = list["tasks"][0].clone();
        if task["follow_up_message_id"].is_string() {
            break task;
        }
        assert!(
            Instant::now() < deadline,
            "the task was not finished: {task}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    println!(
        "another replica finished it and posted the result {:.1} s after the kill",
        killed_at.elapsed().as_secs_f64()
    );
    assert_eq!(task["status"], "completed", "{task}");
    let (finisher,): (Option<String>,) =
        sqlx::query_as("SELECT lease_owner FROM tool_tasks WHERE conversation_id = $1")
            .bind(&conversation)
            .fetch_one(cluster.db.pool())
            .await
            .unwrap();
    assert_ne!(finisher.as_deref(), Some(owner.as_str()));
    assert_eq!(*seen.lock().unwrap(), ["crunched"], "the task ran once");

    let follow_up = task["follow_up_message_id"].as_str().unwrap();
    let response = cluster
        .http
        .get(format!("{gateway}/api/v1/resos/stream/chat/{follow_up}"))
        .bearer_auth(&cluster.token)
        .send()
        .await
        .unwrap();
    let written = SseReader::new(response).rest().await;
    assert_eq!(answer(&written), "Crunched 20.");
    let (questions,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM chat_messages WHERE message_id = $1 AND role = 'user'",
    )
    .bind(follow_up)
    .fetch_one(cluster.db.pool())
    .await
    .unwrap();
    assert_eq!(questions, 1, "posted once");
    cluster.gateways[victim]
        .restart(&[cluster.urls[victim].as_str()])
        .await;
}
