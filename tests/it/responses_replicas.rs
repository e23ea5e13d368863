//! The Responses API across three gateway replicas sharing Redis and PostgreSQL:
//! a background response started on one is read and its stream continued from
//! after any event on another, numbered the same; it is cancelled through a third;
//! and when the replica running one is killed, another takes it over and finishes
//! it with nobody watching.
//!
//! Needs Debian's nginx and redis-server: `scripts/check-replicas` installs them and
//! runs this file.

use std::time::{Duration, Instant};

use maitred_scripted_llm::{Script, ScriptedLlm, Turn};
use serde_json::{Value, json};

use crate::helpers::{SseEvent, SseReader};
use crate::replicas::{Cluster, cluster_with};

fn slow(prefix: &str, words: usize, pace_ms: u64) -> Turn {
    Turn::text_fragments((0..words).map(|i| format!("{prefix}{i} ")))
        .paced(Duration::from_millis(pace_ms))
}

impl Cluster {
    async fn respond(&self, replica: usize, body: Value) -> Value {
        let response = self
            .http
            .post(format!("{}/v1/responses", self.urls[replica]))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{}", self.gateways[replica].log());
        response.json().await.unwrap()
    }

    async fn response_stream(&self, replica: usize, id: &str, after: Option<u64>) -> SseReader {
        let mut url = format!("{}/v1/responses/{id}?stream=true", self.urls[replica]);
        if let Some(after) = after {
            url.push_str(&format!("&starting_after={after}"));
        }
        let response = self
            .http
            .get(url)
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{}", self.gateways[replica].log());
        SseReader::new(response)
    }

    async fn retrieve(&self, replica: usize, id: &str) -> Value {
        self.http
            .get(format!("{}/v1/responses/{id}", self.urls[replica]))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

fn text(response: &Value) -> String {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "message")
        .map(|item| item["content"][0]["text"].as_str().unwrap())
        .collect()
}

fn numbers(events: &[SseEvent]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e.data["sequence_number"].as_u64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs nginx, redis-server and PostgreSQL: run by scripts/check-replicas"]
async fn a_background_response_is_read_resumed_cancelled_and_taken_over_on_any_replica() {
    let llm = ScriptedLlm::start(Script::new([
        slow("r", 60, 30),
        slow("c", 400, 20),
        slow("k", 200, 30),
        Turn::text("The end of k."),
    ]))
    .await
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut c = cluster_with(
        &llm,
        data.path(),
        "[limits]\nconcurrent_generations = 4\nrequests_per_minute = 600\n",
        &[("MAITRED_STREAM_GRACE", "1".to_owned())],
    )
    .await;

    // 1. Started on A, its stream followed on B, then continued on C after the last
    //    event B sent: every event once, numbered from 0 without a gap.
    let begun = c
        .respond(
            0,
            json!({"model": "maitred", "input": "Tell me of r", "background": true}),
        )
        .await;
    let id = begun["id"].as_str().unwrap().to_owned();
    let mut on_b = c.response_stream(1, &id, None).await;
    let mut seen = Vec::new();
    while seen.len() < 12 {
        seen.push(on_b.next().await.unwrap());
    }
    drop(on_b);
    let last = seen.last().unwrap().data["sequence_number"]
        .as_u64()
        .unwrap();
    let mut on_c = c.response_stream(2, &id, Some(last)).await;
    while let Some(event) = on_c.next().await {
        seen.push(event);
    }
    assert_eq!(numbers(&seen), (0..seen.len() as u64).collect::<Vec<_>>());
    let end = &seen.last().unwrap().data;
    assert_eq!(end["type"], "response.completed");
    assert_eq!(text(&end["response"]).split_whitespace().count(), 60);
    // Read on A, it is the object the stream ended with.
    assert_eq!(c.retrieve(0, &id).await, end["response"]);

    // 2. Running on A, cancelled through B: the upstream request at A stops.
    let begun = c
        .respond(
            0,
            json!({"model": "maitred", "input": "Talk of c", "background": true}),
        )
        .await;
    let id = begun["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cancelled: Value = c
        .http
        .post(format!("{}/v1/responses/{id}/cancel", c.urls[1]))
        .bearer_auth(&c.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(c.retrieve(2, &id).await["status"], "cancelled");

    // 3. Running on A with nobody watching, A killed: another replica takes it over
    //    and finishes it, still with nobody watching (past the grace period).
    let begun = c
        .respond(
            0,
            json!({"model": "maitred", "input": "Talk of k", "background": true}),
        )
        .await;
    let id = begun["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    c.gateways[0].kill();
    let killed = Instant::now();
    let finished = loop {
        let read = c.retrieve(1, &id).await;
        if read["status"] != "in_progress" {
            break read;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "not finished: {read}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    println!(
        "a killed replica's background response was finished by another in {:?}",
        killed.elapsed()
    );
    assert_eq!(finished["status"], "completed", "{finished}");
    let said = text(&finished);
    assert!(
        said.starts_with("k0 k1 ") && said.ends_with("The end of k."),
        "{said}"
    );
    c.db.close().await;
    llm.stop().await;
}
