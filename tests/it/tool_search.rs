//! Tool search end to end (docs/tool-search.md): the benchmark's ten MCP servers
//! (300 tools) served for real beside the gateway, whose model is the scripted
//! upstream or the offline model. Past the threshold the model is sent only the
//! search; it searches, the tools found are sent from its next turn on (after the
//! tools it had, which never move), it calls one, the MCP server answers. The search
//! itself never reaches an MCP server and needs no approval. Below the threshold,
//! nothing changes: maitred's own 16 tools are all sent, as before.

#[path = "../../benches/tool_search/catalogue.rs"]
mod catalogue;
#[path = "../../benches/tool_search/servers.rs"]
mod servers;

use std::sync::atomic::Ordering;

use maitred::settings::ToolCallMode;
use maitred::settings::tool_search::Offer;
use maitred_scripted_llm::{Script, ToolCallSpec, Turn};
use serde_json::{Value, json};

use crate::helpers::{Database, Llm, SseEvent, TestApp, answer, of};
use servers::Served;

/// The question, as the person asks it.
const QUESTION: &str = "The customer was charged twice, give them their money back.";
const QUERY: &str = "refund a payment";
const TOOL: &str = "billing__refund_payment";

/// The benchmark's servers, each saying its tool list may be kept `ttl_ms`.
async fn serve(ttl_ms: u64) -> Served {
    servers::serve(&catalogue::servers(), ttl_ms).await
}

/// The gateway given the ten servers instead of maitred's own.
fn with_servers(settings: &mut maitred::settings::Settings, served: &Served) {
    settings.gateway.file.mcp_servers = catalogue::servers()
        .iter()
        .map(|s| servers::config(&served.base, &s.name))
        .collect();
}

/// Arguments for the refund, as the benchmark's model writes them.
fn refund_arguments() -> String {
    let servers = catalogue::servers();
    let billing = servers.iter().find(|s| s.name == "billing").unwrap();
    let refund = billing
        .tools
        .iter()
        .find(|t| t.name == "refund_payment")
        .unwrap();
    catalogue::arguments(refund).to_string()
}

/// The routing set is what the benchmark says: at least 100 questions, every other
/// one held out, each naming one tool of the 300.
#[test]
fn the_routing_set_names_tools_of_the_catalogue() {
    let servers = catalogue::servers();
    assert_eq!(servers.len(), 10);
    assert!(servers.iter().all(|s| s.tools.len() == 30));
    let questions = catalogue::questions();
    assert!(questions.len() >= 100);
    assert_eq!(
        questions.iter().filter(|q| q.held_out).count() * 2,
        questions.len()
    );
    for question in &questions {
        let (server, tool) = question.tool.split_once("__").unwrap();
        let known = servers
            .iter()
            .any(|s| s.name == server && s.tools.iter().any(|t| t.name == tool));
        assert!(known, "{}: {}", question.tool, question.text);
        assert!(!question.text.contains(tool), "{}", question.text);
    }
}

/// Search, call, answer: as tool-call deltas.
fn native_script() -> Script {
    Script::new([
        Turn::tool_calls([ToolCallSpec::new(
            "call_search",
            "search_tools",
            json!({ "query": QUERY }).to_string(),
        )]),
        Turn::tool_calls([ToolCallSpec::new("call_refund", TOOL, refund_arguments())]),
        Turn::text("Refunded."),
    ])
}

/// The tools a request to the upstream offered, by name.
fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            t["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

fn call_of<'a>(events: &'a [SseEvent], tool: &str) -> &'a Value {
    of(events, "tool_call")
        .into_iter()
        .find(|c| c["tool"] == tool)
        .unwrap_or_else(|| panic!("no call of {tool}: {events:?}"))
}

fn result_of<'a>(events: &'a [SseEvent], call: &Value) -> &'a Value {
    of(events, "tool_result")
        .into_iter()
        .find(|r| r["id"] == call["id"])
        .expect("the call's result")
}

async fn search_load_call_native(database: &Database) {
    let served = serve(5 * 60 * 1000).await;
    let app = TestApp::spawn_chat(database, Llm::Scripted(native_script()), |s| {
        with_servers(s, &served)
    })
    .await;
    let token = app.chat_token().await;
    let events = app.ask(&token, QUESTION, None).await.rest().await;
    assert_eq!(answer(&events), "Refunded.");
    assert!(of(&events, "approval_required").is_empty(), "{events:?}");

    // The search: the gateway's own card, no server, found the refund.
    let search = call_of(&events, "search_tools");
    assert_eq!(search["server"], "");
    assert_eq!(search["arguments"]["query"], QUERY);
    let found = result_of(&events, search);
    assert_eq!(found["status"], "ok");
    assert!(
        found["summary"]
            .as_str()
            .unwrap()
            .starts_with("found 5: Refund payment (billing)"),
        "{found}"
    );
    // The call, at the billing server.
    let refund = call_of(&events, "refund_payment");
    assert_eq!(refund["server"], "billing");
    assert_eq!(result_of(&events, refund)["status"], "ok");
    // Only the refund reached an MCP server: the search never did.
    assert_eq!(*served.calls.lock().unwrap(), [TOOL]);

    let requests = app.llm.as_ref().unwrap().requests();
    assert_eq!(requests.len(), 3);
    let first = offered(&requests[0].body);
    let second = offered(&requests[1].body);
    let third = offered(&requests[2].body);
    // 300 tools, none pinned: only the search is sent at first.
    assert_eq!(first, ["search_tools"]);
    // What it found follows, after what was sent before, best first.
    assert_eq!(second[..first.len()], first[..]);
    assert_eq!(second[1], TOOL);
    assert_eq!(second.len(), 1 + 5);
    assert_eq!(requests[1].body["tools"], requests[2].body["tools"]);
    assert_eq!(third, second);
    // The model read which tools it found, a line each.
    let told = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap();
    assert_eq!(told["role"], "tool");
    assert!(
        told["content"]
            .as_str()
            .unwrap()
            .contains("- billing__refund_payment: Refund payment."),
        "{told}"
    );
    app.stop().await;
}

async fn search_load_call_text(database: &Database) {
    let served = serve(5 * 60 * 1000).await;
    let call = |name: &str, arguments: Value| {
        Turn::text(format!(
            "<tool_call>\n{}\n</tool_call>",
            json!({ "name": name, "arguments": arguments })
        ))
    };
    let script = Script::new([
        call("search_tools", json!({ "query": QUERY })),
        call(TOOL, serde_json::from_str(&refund_arguments()).unwrap()),
        Turn::text("Refunded."),
    ]);
    let app = TestApp::spawn_chat(database, Llm::Scripted(script), |s| {
        with_servers(s, &served);
        s.gateway.llm.as_mut().unwrap().tool_calls = ToolCallMode::Text;
    })
    .await;
    let token = app.chat_token().await;
    let events = app.ask(&token, QUESTION, None).await.rest().await;
    assert_eq!(answer(&events), "Refunded.");
    let search = call_of(&events, "search_tools");
    assert_eq!(result_of(&events, search)["status"], "ok");
    let refund = call_of(&events, "refund_payment");
    assert_eq!(result_of(&events, refund)["status"], "ok");
    assert_eq!(*served.calls.lock().unwrap(), [TOOL]);

    // The tools are written into the system prompt: the search's line first, the
    // tools it found after it, and everything before them unchanged.
    let requests = app.llm.as_ref().unwrap().requests();
    let system = |at: usize| {
        requests[at].body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (first, second) = (system(0), system(1));
    assert!(requests[0].body.get("tools").is_none());
    let search_line = first.find("\"name\":\"search_tools\"").expect("the search");
    assert!(!first.contains(TOOL));
    let loaded = second
        .find(&format!("\"name\":\"{TOOL}\""))
        .expect("loaded");
    assert!(loaded > search_line);
    let end = first.find("</tools>").unwrap();
    let kept = first[..end].trim_end_matches('\n');
    assert!(second.starts_with(kept), "the start of the prompt moved");
    assert_eq!(system(2), second);
    app.stop().await;
}

async fn search_load_call_openai_api(database: &Database) {
    let served = serve(5 * 60 * 1000).await;
    let app = TestApp::spawn_chat(database, Llm::Scripted(native_script()), |s| {
        with_servers(s, &served)
    })
    .await;
    let token = app.chat_token().await;
    let completion: Value = app
        .http
        .post(format!("{}/v1/chat/completions", app.gateway_url))
        .bearer_auth(&token)
        .json(&json!({
            "model": "maitred",
            "messages": [{ "role": "user", "content": QUESTION }],
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(completion["choices"][0]["message"]["content"], "Refunded.");
    let activity = completion["maitred"]["tool_activity"].as_array().unwrap();
    let results: Vec<(&str, &str, &str)> = activity
        .iter()
        .filter_map(|a| a.get("tool_result"))
        .map(|r| {
            (
                r["server"].as_str().unwrap(),
                r["tool"].as_str().unwrap(),
                r["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            ("", "search_tools", "ok"),
            ("billing", "refund_payment", "ok")
        ]
    );
    assert_eq!(*served.calls.lock().unwrap(), [TOOL]);
    app.stop().await;
}

async fn the_offline_model_searches_then_calls_what_it_found(database: &Database) {
    let served = serve(5 * 60 * 1000).await;
    let app = TestApp::spawn_chat(database, Llm::Offline, |s| with_servers(s, &served)).await;
    let token = app.chat_token().await;
    let events = app
        .ask(&token, "Which products are running low on stock?", None)
        .await
        .rest()
        .await;
    let calls = of(&events, "tool_call");
    assert_eq!(calls.len(), 2, "{events:?}");
    assert_eq!(calls[0]["tool"], "search_tools");
    assert_eq!(
        calls[0]["arguments"]["query"],
        "Which products are running low on stock?"
    );
    assert_eq!(calls[1]["server"], "inventory");
    assert_eq!(calls[1]["tool"], "listLowStock");
    assert_eq!(result_of(&events, calls[1])["status"], "ok");
    assert!(!answer(&events).is_empty());
    assert_eq!(*served.calls.lock().unwrap(), ["inventory__listLowStock"]);
    app.stop().await;
}

crate::on_both_databases!(
    search_load_call_native,
    search_load_call_text,
    search_load_call_openai_api,
    the_offline_model_searches_then_calls_what_it_found,
);

/// maitred's own server alone: 16 tools, under the threshold. Every tool is sent
/// directly, in the server's order, and there is no search.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn below_the_threshold_every_tool_is_sent_as_before() {
    let script = Script::new([
        Turn::tool_calls([ToolCallSpec::new("t1", "resos__getTables", "{}")]),
        Turn::text("20 tables."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |_| {}).await;
    let token = app.chat_token().await;
    let events = app.ask(&token, "How many tables?", None).await.rest().await;
    assert_eq!(answer(&events), "20 tables.");
    let requests = app.llm.as_ref().unwrap().requests();
    let sent = offered(&requests[0].body);
    let listed: Vec<String> = maitred_mcp_tools(&app).await;
    assert_eq!(listed.len(), 16);
    assert_eq!(sent, listed);
    assert_eq!(requests[0].body["tools"], requests[1].body["tools"]);
    app.stop().await;
}

/// The tools of maitred's own MCP role as a real client lists them, named as the
/// model sees them; the listing says it may be kept five minutes, by anyone.
async fn maitred_mcp_tools(app: &TestApp) -> Vec<String> {
    let token = app.token("maitred-gateway", &[]).await;
    let client = crate::mcp::connect(app, &token, crate::mcp::MODERN).await;
    let listed = client.list_tools(Some(Default::default())).await.unwrap();
    assert_eq!(listed.ttl_ms, Some(300_000));
    assert_eq!(listed.cache_scope, Some(rmcp::model::CacheScope::Public));
    let names = listed
        .tools
        .iter()
        .map(|t| format!("resos__{}", t.name))
        .collect();
    client.cancel().await.unwrap();
    names
}

/// Pinned tools and servers offered always are sent with every question even when
/// the rest are searched for; a server offered `never` is neither sent nor found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_always_and_never_shape_what_is_sent() {
    let served = serve(5 * 60 * 1000).await;
    let script = Script::new([
        Turn::tool_calls([ToolCallSpec::new(
            "s1",
            "search_tools",
            json!({ "query": "time off vacation days" }).to_string(),
        )]),
        Turn::text("Done."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        with_servers(s, &served);
        for server in &mut s.gateway.file.mcp_servers {
            match server.name.as_str() {
                "restaurant" => server.offer = Offer::Always,
                "crm" => server.pinned = vec!["search*".into()],
                "hr" => server.offer = Offer::Never,
                _ => {}
            }
        }
    })
    .await;
    let token = app.chat_token().await;
    let events = app
        .ask(&token, "How many days off do I have left?", None)
        .await
        .rest()
        .await;
    let requests = app.llm.as_ref().unwrap().requests();
    let first = offered(&requests[0].body);
    // crm's pinned tools first (its server comes first), then the restaurant's 30,
    // then the search.
    assert_eq!(first[..2], ["crm__searchContacts", "crm__searchCompanies"]);
    assert_eq!(first.len(), 2 + 30 + 1);
    assert!(first[2..32].iter().all(|t| t.starts_with("restaurant__")));
    assert_eq!(first[32], "search_tools");
    let search = requests[0].body["tools"][32]["function"]["description"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, from) = search.split_once("from: ").unwrap();
    let (servers, _) = from.split_once(". ").unwrap();
    assert_eq!(
        servers,
        "crm, calendar, tickets, billing, inventory, docs, analytics, shipping"
    );
    // The HR server's tools are never found.
    let found = result_of(&events, call_of(&events, "search_tools"));
    assert!(
        !found["summary"].as_str().unwrap().contains("(hr)"),
        "{found}"
    );
    app.stop().await;
}

/// A server's listing is kept as long as its `ttlMs` says: five minutes, one
/// listing for two questions; zero, a listing per question, and a listing with the
/// same tools changes nothing the model is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_are_kept_for_their_ttl_and_the_tools_sent_stay_the_same() {
    for (ttl_ms, kept) in [(5 * 60 * 1000, true), (0, false)] {
        let served = serve(ttl_ms).await;
        let script = Script::new([Turn::text("One."), Turn::text("Two.")]);
        let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
            with_servers(s, &served);
            // All 300 sent: any reshuffle would show.
            s.gateway.file.tool_search.defer_above = 1000;
        })
        .await;
        let token = app.chat_token().await;
        app.ask(&token, "First?", None).await.rest().await;
        let after_one = served.lists.load(Ordering::SeqCst);
        app.ask(&token, "Second?", None).await.rest().await;
        let after_two = served.lists.load(Ordering::SeqCst);
        assert!(after_one >= 10, "every server listed: {after_one}");
        if kept {
            assert_eq!(after_two, after_one, "ttl {ttl_ms}");
        } else {
            assert!(after_two > after_one, "ttl {ttl_ms}");
        }
        let requests = app.llm.as_ref().unwrap().requests();
        assert_eq!(offered(&requests[0].body).len(), 300);
        assert_eq!(requests[0].body["tools"], requests[1].body["tools"]);
        app.stop().await;
    }
}
