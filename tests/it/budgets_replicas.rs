//! Budgets under concurrency across replicas: three gateways on PostgreSQL and Redis
//! behind nginx, 200 questions at once from one team against a cap that lets about
//! 50 of them be reserved. The ledger never passes the cap, every reservation is
//! closed, and the refused questions got the typed `budget` error.

use std::time::Duration;

use maitred_scripted_llm::{Script, ScriptedLlm, Turn};

use crate::budgets::{At, COMPLETION, PROMPT, questions_at_once_against_a_team_cap};
use crate::replicas::cluster_with;
use crate::token_exchange::person_tokens_at;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs nginx, redis-server and PostgreSQL: run by scripts/check-replicas"]
async fn questions_at_once_on_three_replicas_never_pass_the_team_cap() {
    // Slow first tokens: the questions all reserve before any settles.
    let turn = Turn::text("Here you are.")
        .usage(PROMPT as u32, COMPLETION as u32)
        .first_token_delay(Duration::from_millis(1_500));
    let llm = ScriptedLlm::start(Script::repeat(turn)).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let toml = "[limits]\nconcurrent_generations = 300\nconcurrent_viewers = 300\nrequests_per_minute = 1000\n\n\
                [prices.scripted]\ninput_per_million = 1.0\noutput_per_million = 2.0\n\n\
                [budgets]\nmax_output_tokens = 200\n";
    let cluster = cluster_with(&llm, data.path(), toml, &[]).await;
    let redirect = format!("{}/login/callback", cluster.public_gateway);
    let credentials = maitred::identity::dev::DevCredentials::load(data.path()).unwrap();
    let mut tokens = Vec::new();
    for username in ["admin", "operator"] {
        let password = credentials.users[username].password.clone();
        let issued = person_tokens_at(
            &cluster.http,
            &cluster.public_backend,
            &redirect,
            username,
            &password,
            "openid profile chat.read chat.write",
        )
        .await;
        tokens.push(issued["access_token"].as_str().unwrap().to_owned());
    }
    let gateways: Vec<At<'_>> = cluster
        .urls
        .iter()
        .map(|url| At {
            http: &cluster.http,
            gateway: url,
        })
        .collect();
    questions_at_once_against_a_team_cap(&gateways, &tokens[0], &tokens[1], 200).await;
}
