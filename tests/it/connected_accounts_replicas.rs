//! One refresh across replicas (issue 28's figure): three gateway replicas on
//! PostgreSQL and Redis behind nginx (`replicas::cluster_with`), each with the notes
//! server of the connected-accounts lab whose access tokens the server refuses after
//! 5 s (`MAITRED_ACCOUNTS_SHORT_LAB`, started by `scripts/check-connected-accounts`).
//! A person connects alice once; when her token has expired, 50 questions of hers at
//! once, spread over the three replicas, each call `notes__whoami`: every call
//! succeeds, and nanoidp (which rotates refresh tokens, with reuse detection) sees
//! exactly one refresh and no refused one, so no refresh token was sent twice and
//! her token family lives on (one more expiry later, one more refresh serves).
//!
//! The gateways trust the short lab's CA by their own `SSL_CERT_FILE`; the test's
//! "browser" trusts it explicitly, so the test does not depend on which lab's CA the
//! test process was given.

use std::time::{Duration, Instant};

use chrono::{DateTime, FixedOffset};
use maitred_scripted_llm::{ScriptedLlm, ToolCallSpec, Turn};
use serde_json::Value;

use crate::connected_accounts::{Lab, card_url, landed_at, until_card};
use crate::helpers::{Database, SseEvent, of};
use crate::process::ask;
use crate::replicas::{Cluster, cluster_with};
use crate::token_exchange::person_tokens_at;

/// Questions asked at once when the token has expired.
const BURST: usize = 50;
/// Longer than the lab's access-token lifetime at the notes server (5 s).
const PAST_EXPIRY: Duration = Duration::from_secs(6);

/// The lab whose access tokens expire at the notes server after 5 s.
fn short_lab() -> Option<Lab> {
    Lab::from_var("MAITRED_ACCOUNTS_SHORT_LAB")
}

/// `lab.py count --state-dir <lab> <args>`, with the lab's own virtualenv.
fn lab_count(lab: &Lab, args: &[&str]) -> usize {
    lab.run("count", args)
        .parse()
        .expect("lab.py count prints a number")
}

/// Refreshes of alice's tokens at nanoidp that succeeded.
fn refreshes(lab: &Lab) -> usize {
    lab_count(
        lab,
        &[
            "--grant",
            "refresh_token",
            "--user",
            "alice",
            "--status",
            "success",
        ],
    )
}

/// Refresh requests nanoidp refused, whoever's (a replayed refresh token is one).
fn refused_refreshes(lab: &Lab) -> usize {
    lab_count(lab, &["--grant", "refresh_token", "--status", "failed"])
}

/// `whoami` calls the notes server accepted as alice.
fn whoami_calls(lab: &Lab) -> usize {
    call_times(lab).len()
}

/// When nanoidp granted alice's refreshes (its audit log), in order.
fn refresh_times(lab: &Lab) -> Vec<DateTime<FixedOffset>> {
    lab.log("audit_log")
        .iter()
        .filter(|e| {
            e["event_type"] == "token_request"
                && e["details"]["grant_type"] == "refresh_token"
                && e["username"] == "alice"
                && e["status"] == "success"
        })
        .filter_map(|e| DateTime::parse_from_rfc3339(e["timestamp"].as_str()?).ok())
        .collect()
}

/// When the notes server accepted alice's `whoami` calls, in order.
fn call_times(lab: &Lab) -> Vec<DateTime<FixedOffset>> {
    lab.log("calls_log")
        .iter()
        .filter(|c| c["subject"] == "alice" && c["tool"] == "whoami" && c["status"] == "accepted")
        .filter_map(|c| DateTime::parse_from_rfc3339(c["time"].as_str()?).ok())
        .collect()
}

/// The question's number, from its text ("… (question N)").
fn number(body: &Value) -> String {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let question = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    question
        .rsplit("(question ")
        .next()
        .unwrap_or_default()
        .trim_end_matches(')')
        .to_owned()
}

/// The model: `notes__whoami` (connecting first where only `notes__connect` is
/// offered), then a text answer; each request from where its question stands, so
/// the same model serves any number of questions at once on any replica.
fn respond(body: &Value) -> Turn {
    let n = number(body);
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let asked = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .unwrap_or(0);
    let answered: Vec<&str> = messages[asked..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["tool_call_id"].as_str())
        .collect();
    let offered: Vec<&str> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    let (whoami, connect) = (format!("whoami_{n}"), format!("connect_{n}"));
    if let Some(result) = messages[asked..]
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == whoami.as_str())
    {
        let content = result["content"].as_str().unwrap_or_default();
        let who = if content.contains("\"alice\"") {
            "alice"
        } else {
            "not alice"
        };
        return Turn::text(format!("You are {who} at notes ({n})."));
    }
    if offered.contains(&"notes__whoami") {
        return Turn::tool_calls([ToolCallSpec::new(whoami, "notes__whoami", "{}")]);
    }
    if offered.contains(&"notes__connect") && !answered.contains(&connect.as_str()) {
        return Turn::tool_calls([ToolCallSpec::new(connect, "notes__connect", "{}")]);
    }
    Turn::text(format!(
        "The notes tools are not offered ({n}): {offered:?}"
    ))
}

/// The gateways' configuration: the short lab's notes server, and limits that let
/// one person ask 50 questions at once.
fn gateway_toml(lab: &Lab) -> String {
    format!(
        "[limits]\nconcurrent_generations = 200\nconcurrent_viewers = 200\nrequests_per_minute = 1000\n\n\
         [[mcp_servers]]\nname = \"notes\"\nurl = \"{}\"\ndescription = \"the person's notes\"\n\
         read_only_tools = [\"whoami\", \"list_notes\"]\ntimeout = 10\n\
         [mcp_servers.auth]\ntype = \"user_oauth\"\nscopes = [\"notes:read\"]\n",
        lab.mcp_url()
    )
}

/// What the gateways logged about refreshing (never a token: maitred logs none).
fn refresh_logs(cluster: &Cluster) -> String {
    let mut lines = Vec::new();
    for (i, gateway) in cluster.gateways.iter().enumerate() {
        for line in gateway.log().lines() {
            if [
                "renew", "refresh", "refused", "sign in", "account", "WARN", "ERROR",
            ]
            .iter()
            .any(|w| line.contains(w))
            {
                lines.push(format!("gateway {i}: {line}"));
            }
        }
    }
    let skip = lines.len().saturating_sub(200);
    lines[skip..].join("\n")
}

/// Per replica: the requests its notes server refused and it sent again with a
/// fresh token, and the refreshes it made, as its log tells them so far.
fn replica_counts(cluster: &Cluster) -> Vec<(usize, usize)> {
    cluster
        .gateways
        .iter()
        .map(|g| {
            let log = g.log();
            (
                log.matches("the MCP server refused our token; retrying")
                    .count(),
                log.matches("renewed a person's access at the MCP server")
                    .count(),
            )
        })
        .collect()
}

/// One question's answer, read to its end, and how long it took.
struct Answered {
    n: usize,
    replica: usize,
    events: Vec<SseEvent>,
    took: Duration,
}

/// Asks question `n` at `gateway` and reads the answer to `done`.
async fn question(
    http: &reqwest::Client,
    gateway: &str,
    token: &str,
    n: usize,
    replica: usize,
) -> Answered {
    let started = Instant::now();
    let mut stream = ask(
        http,
        gateway,
        token,
        &format!("Who am I at notes? (question {n})"),
    )
    .await;
    let events = tokio::time::timeout(Duration::from_secs(60), stream.rest())
        .await
        .unwrap_or_else(|_| panic!("question {n} at replica {replica} did not end in 60 s"));
    Answered {
        n,
        replica,
        events,
        took: started.elapsed(),
    }
}

/// The answer called `notes__whoami` once, as alice, and finished without a card.
fn assert_served(answered: &Answered, cluster: &Cluster) {
    let Answered {
        n, replica, events, ..
    } = answered;
    let calls = of(events, "tool_call");
    let results = of(events, "tool_result");
    let ok = calls.len() == 1
        && calls[0]["server"] == "notes"
        && calls[0]["tool"] == "whoami"
        && results.len() == 1
        && results[0]["status"] == "ok"
        && results[0]["id"] == calls[0]["id"]
        && of(events, "input_required").is_empty()
        && of(events, "error").is_empty()
        && of(events, "done")
            .first()
            .is_some_and(|d| d["finish_reason"] == "stop")
        && crate::helpers::answer(events).contains("You are alice at notes");
    assert!(
        ok,
        "question {n} at replica {replica} was not served as alice: {events:?}\n\nthe gateways on refreshing:\n{}",
        refresh_logs(cluster)
    );
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn fifty_questions_on_three_replicas_at_expiry_refresh_once() {
    let Some(lab) = short_lab() else { return };
    if Database::postgres().is_none() {
        eprintln!("the replicas need PostgreSQL (TEST_DATABASE_URL): skipped");
        return;
    }
    let llm = ScriptedLlm::start_responding(respond).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let ca = lab.ca().display().to_string();
    let cluster = cluster_with(
        &llm,
        data.path(),
        &gateway_toml(&lab),
        &[("SSL_CERT_FILE", ca)],
    )
    .await;
    let redirect = format!("{}/login/callback", cluster.public_gateway);
    let people = maitred::identity::dev::DevCredentials::load(data.path()).unwrap();
    let token = person_tokens_at(
        &cluster.http,
        &cluster.public_backend,
        &redirect,
        "operator",
        &people.users["operator"].password,
        "openid profile chat.read chat.write",
    )
    .await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();

    // The person connects alice once, through replica 1; her tools work there.
    let refused_at_start = refused_refreshes(&lab);
    let calls_at_start = whoami_calls(&lab);
    let mut stream = ask(
        &cluster.http,
        &cluster.urls[0],
        &token,
        "Who am I at notes? (question 0)",
    )
    .await;
    let (_, card) = until_card(&mut stream).await;
    assert_eq!(card["connect"]["server"], "notes", "{card}");
    // The test's browser trusts the short lab's CA itself, whichever the process was given.
    let callback = lab
        .sign_in_trusting(card_url(&card), "alice", Some(&lab.ca()))
        .await;
    let (status, page) = landed_at(&cluster.http, &callback, &token).await;
    assert_eq!(status, 200, "{page}");
    let events = stream.rest().await;
    let results = of(&events, "tool_result");
    assert_eq!(results.len(), 2, "connect, then whoami: {events:?}");
    assert!(results.iter().all(|r| r["status"] == "ok"), "{events:?}");
    assert_eq!(
        whoami_calls(&lab) - calls_at_start,
        1,
        "her first whoami reached notes"
    );

    // Her access token is now older than the notes server accepts.
    tokio::time::sleep(PAST_EXPIRY).await;
    let before = refreshes(&lab);
    let calls_before = whoami_calls(&lab);
    let replicas_before = replica_counts(&cluster);
    let started = Instant::now();
    let burst = futures::future::join_all((1..=BURST).map(|n| {
        let replica = n % cluster.urls.len();
        question(&cluster.http, &cluster.urls[replica], &token, n, replica)
    }))
    .await;
    let burst_took = started.elapsed();
    let during = refreshes(&lab) - before;
    let refused = refused_refreshes(&lab) - refused_at_start;
    // Which replicas had a token refused, and which one refreshed.
    let (retried, renewed): (Vec<usize>, Vec<usize>) = replica_counts(&cluster)
        .iter()
        .zip(&replicas_before)
        .map(|(now, then)| (now.0 - then.0, now.1 - then.1))
        .unzip();
    let mut times: Vec<Duration> = burst.iter().map(|a| a.took).collect();
    times.sort();
    // When the refresh(es) and the burst's calls happened, at nanoidp and at notes:
    // a new token lives 5 s at notes, so a burst whose last call came later than
    // that after the refresh would rightly need a second one.
    let refreshed_at = refresh_times(&lab).split_off(before);
    let calls_at = call_times(&lab).split_off(calls_before);
    let ms =
        |from: &DateTime<FixedOffset>, to: &DateTime<FixedOffset>| (*to - *from).num_milliseconds();
    let timeline = match (refreshed_at.first(), calls_at.first(), calls_at.last()) {
        (Some(refresh), Some(first), Some(last)) => format!(
            "the refreshes at {:?} ms after the first one; the burst's calls at notes from {} ms to {} ms after it",
            refreshed_at
                .iter()
                .map(|t| ms(refresh, t))
                .collect::<Vec<_>>(),
            ms(refresh, first),
            ms(refresh, last),
        ),
        _ => format!("refreshes at {refreshed_at:?}, {} calls", calls_at.len()),
    };
    eprintln!(
        "connected accounts across replicas: {BURST} questions on {} replicas at token expiry: \
         {during} refresh(es) at the authorization server, {refused} refused; \
         per replica, calls retried after a 401 {retried:?} and refreshes made {renewed:?}; answers p50 {} ms, max {} ms, the burst {} ms; {} whoami calls reached notes; {timeline}",
        cluster.urls.len(),
        percentile(&times, 50).as_millis(),
        times.last().unwrap().as_millis(),
        burst_took.as_millis(),
        calls_at.len(),
    );
    for answered in &burst {
        assert_served(answered, &cluster);
    }
    assert_eq!(
        whoami_calls(&lab) - calls_before,
        BURST,
        "every whoami reached notes as alice, once"
    );
    assert_eq!(
        during,
        1,
        "exactly one refresh for {BURST} questions on 3 replicas ({timeline})\n\nthe gateways on refreshing:\n{}",
        refresh_logs(&cluster)
    );
    assert_eq!(
        renewed.iter().sum::<usize>(),
        1,
        "one replica refreshed, the others used what it stored ({timeline})"
    );
    assert_eq!(
        refused, 0,
        "no refresh refused (a replayed refresh token would be, and would end her family)"
    );

    // One more expiry: her token family lives on, and one refresh serves again.
    tokio::time::sleep(PAST_EXPIRY).await;
    let again = question(&cluster.http, &cluster.urls[1], &token, BURST + 1, 1).await;
    assert_served(&again, &cluster);
    let after = refreshes(&lab);
    eprintln!(
        "connected accounts across replicas: after another expiry, one question took {} ms and \
         {} more refresh(es)",
        again.took.as_millis(),
        after - before - during
    );
    assert_eq!(after - before, 2, "one more refresh after the next expiry");
    assert_eq!(
        refused_refreshes(&lab) - refused_at_start,
        0,
        "none refused"
    );
    llm.stop().await;
}
