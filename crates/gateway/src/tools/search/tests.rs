//! What the model is offered, turn by turn, and what a search finds, on a small
//! catalogue of three servers whose tools overlap.

use std::sync::Arc;

use maitred_core::settings::tool_search::ToolSearch;
use maitred_llm::{Message, ToolCall};
use serde_json::json;

use super::{SEARCH_TOOLS, offer, query_of, search};
use crate::tools::{Catalogue, Offering, RegisteredTool};

fn tools(offering: Offering) -> Vec<Arc<RegisteredTool>> {
    [
        (
            "crm__searchContacts",
            "Search contacts by name, email or company.",
            &["query", "limit"][..],
        ),
        (
            "crm__createNote",
            "Add a note to a contact's timeline.",
            &["contactId", "text"],
        ),
        (
            "calendar__createEvent",
            "Schedule a meeting or event and invite attendees.",
            &["title", "start", "attendees"],
        ),
        (
            "calendar__cancelEvent",
            "Cancel an event and tell its attendees.",
            &["eventId"],
        ),
        (
            "billing__refundPayment",
            "Refund all or part of a payment to the card it came from.",
            &["paymentId", "amount"],
        ),
        (
            "billing__listInvoices",
            "List invoices, filtered by customer or status (paid, overdue).",
            &["customerId", "status"],
        ),
    ]
    .into_iter()
    .map(|(name, description, parameters)| {
        Arc::new(RegisteredTool::described(
            name,
            description,
            parameters,
            offering,
        ))
    })
    .collect()
}

fn catalogue(tools: Vec<Arc<RegisteredTool>>, defer_above: usize) -> Catalogue {
    Catalogue::new(
        tools,
        Vec::new(),
        ToolSearch {
            defer_above,
            results: 3,
        },
    )
}

fn names(offered: &super::Offered) -> Vec<&str> {
    offered.tools.iter().map(|t| t.name.as_str()).collect()
}

fn all(_: &RegisteredTool) -> bool {
    true
}

fn asked(question: &str) -> Vec<Message> {
    vec![
        Message::System {
            content: "You help.".into(),
        },
        Message::User {
            content: question.into(),
        },
    ]
}

/// `messages` with the model's call of `name` and its result.
fn called(mut messages: Vec<Message>, id: &str, name: &str, result: &str) -> Vec<Message> {
    messages.push(Message::Assistant {
        content: None,
        tool_calls: vec![ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: "{}".into(),
        }],
    });
    messages.push(Message::Tool {
        tool_call_id: id.into(),
        content: result.into(),
    });
    messages
}

#[test]
fn at_or_below_the_threshold_every_tool_is_sent_as_before_and_nothing_searched() {
    let catalogue = catalogue(tools(Offering::Auto), 6);
    let offered = offer(&catalogue, all, &asked("Refund the last payment"));
    assert!(!offered.searching);
    let expected: Vec<&str> = catalogue.tools.iter().map(|t| t.exposed.as_str()).collect();
    assert_eq!(names(&offered), expected);
    assert_eq!(offered.tools[0], catalogue.tools[0].def);
}

#[test]
fn above_it_only_pinned_tools_and_the_search_are_sent() {
    let mut tools = tools(Offering::Auto);
    // Pinned, or of a server that is always offered.
    let pinned = RegisteredTool::described(
        "calendar__createEvent",
        "Schedule a meeting.",
        &[],
        Offering::Always,
    );
    tools[2] = Arc::new(pinned);
    let catalogue = catalogue(tools, 5);
    let offered = offer(&catalogue, all, &asked("Refund the last payment"));
    assert!(offered.searching);
    assert_eq!(names(&offered), ["calendar__createEvent", SEARCH_TOOLS]);
    let search = &offered.tools[1];
    assert!(search.read_only);
    assert!(
        search
            .description
            .contains("5 more are available, from: crm, calendar, billing"),
        "{}",
        search.description
    );
    assert_eq!(search.parameters["required"], json!(["query"]));
}

#[test]
fn a_deferred_server_is_searched_for_whatever_the_count() {
    let mut tools = tools(Offering::Auto);
    for (at, name) in [(4, "billing__refundPayment"), (5, "billing__listInvoices")] {
        tools[at] = Arc::new(RegisteredTool::described(name, "", &[], Offering::Deferred));
    }
    let catalogue = catalogue(tools, 40);
    let offered = offer(&catalogue, all, &asked("Refund the last payment"));
    assert_eq!(
        names(&offered),
        [
            "crm__searchContacts",
            "crm__createNote",
            "calendar__createEvent",
            "calendar__cancelEvent",
            SEARCH_TOOLS
        ]
    );
}

#[test]
fn what_a_search_found_is_loaded_after_the_stable_part_and_the_prefix_never_moves() {
    let catalogue = catalogue(tools(Offering::Auto), 2);
    let question = asked("I was charged twice, give me my money back");
    let first = offer(&catalogue, all, &question);
    assert_eq!(names(&first), [SEARCH_TOOLS]);

    let found = search(&catalogue, "refund a payment", all);
    assert_eq!(found.found[0].exposed, "billing__refundPayment");
    let after_search = called(question, "c1", SEARCH_TOOLS, &found.for_model());
    let second = offer(&catalogue, all, &after_search);
    assert_eq!(second.tools[..first.tools.len()], first.tools[..]);
    assert_eq!(second.tools[1].name, "billing__refundPayment");
    assert_eq!(second.tools.len(), 1 + found.found.len());

    // A second search appends what is new, after what the first loaded.
    let more = search(&catalogue, "cancel the meeting", all);
    assert_eq!(more.found[0].exposed, "calendar__cancelEvent");
    let after_two = called(after_search, "c2", SEARCH_TOOLS, &more.for_model());
    let third = offer(&catalogue, all, &after_two);
    assert_eq!(third.tools[..second.tools.len()], second.tools[..]);
    assert!(names(&third).contains(&"calendar__cancelEvent"));
    let unique: std::collections::HashSet<&str> = names(&third).into_iter().collect();
    assert_eq!(unique.len(), third.tools.len(), "{:?}", names(&third));
}

#[test]
fn the_next_question_keeps_the_tools_called_before_but_not_those_only_found() {
    let catalogue = catalogue(tools(Offering::Auto), 2);
    let found = search(&catalogue, "refund a payment", all);
    let earlier = called(
        asked("Refund my payment"),
        "c1",
        SEARCH_TOOLS,
        &found.for_model(),
    );
    let earlier = called(earlier, "c2", "billing__refundPayment", "{\"ok\": true}");
    let mut next = earlier;
    next.push(Message::Assistant {
        content: Some("Refunded.".into()),
        tool_calls: Vec::new(),
    });
    next.push(Message::User {
        content: "Thanks. And my invoices?".into(),
    });
    let offered = offer(&catalogue, all, &next);
    assert_eq!(names(&offered), [SEARCH_TOOLS, "billing__refundPayment"]);
}

#[test]
fn a_person_is_neither_sent_nor_shown_tools_their_policy_refuses() {
    let catalogue = catalogue(tools(Offering::Auto), 2);
    let no_billing = |t: &RegisteredTool| t.server != "billing";
    let found = search(&catalogue, "refund a payment", no_billing);
    assert!(found.found.iter().all(|t| t.server != "billing"));
    // A search result naming a refused tool (from another person's answer, say)
    // loads nothing.
    let everyone = search(&catalogue, "refund a payment", all);
    let messages = called(
        asked("Refund it"),
        "c1",
        SEARCH_TOOLS,
        &everyone.for_model(),
    );
    let offered = offer(&catalogue, no_billing, &messages);
    assert!(
        names(&offered).iter().all(|n| !n.starts_with("billing")),
        "{:?}",
        names(&offered)
    );
    // Four tools are left: under a threshold of four, all are sent.
    let small = Catalogue::new(
        catalogue.tools.clone(),
        Vec::new(),
        ToolSearch {
            defer_above: 4,
            results: 3,
        },
    );
    assert!(!offer(&small, no_billing, &messages).searching);
}

#[test]
fn words_that_match_nothing_find_nothing_and_the_model_is_told_to_try_others() {
    let catalogue = catalogue(tools(Offering::Auto), 2);
    let found = search(&catalogue, "weather in Oslo", all);
    assert!(found.found.is_empty());
    assert!(found.for_model().starts_with("No tool matches"));
    assert_eq!(found.summary(), "no tool found");
    let empty = search(&catalogue, "", all);
    assert!(empty.for_model().starts_with("Error"));
}

#[test]
fn the_result_lists_each_tool_on_a_line_that_loads_it() {
    let catalogue = catalogue(tools(Offering::Auto), 2);
    let found = search(&catalogue, "invoices that are overdue", all);
    let text = found.for_model();
    assert!(
        text.contains("- billing__listInvoices: List invoices. List invoices, filtered by customer or status (paid, overdue)."),
        "{text}"
    );
    let listed: Vec<&str> = super::found::listed(&text).collect();
    let expected: Vec<&str> = found.found.iter().map(|t| t.exposed.as_str()).collect();
    assert_eq!(listed, expected);
    assert!(found.summary().starts_with("found "), "{}", found.summary());
    assert!(found.summary().contains("List invoices (billing)"));
}

#[test]
fn the_server_and_parameter_names_count() {
    let catalogue = catalogue(tools(Offering::Auto), 2);
    let by_server = search(&catalogue, "calendar", all);
    assert!(by_server.found.iter().all(|t| t.server == "calendar"));
    assert_eq!(by_server.found.len(), 2);
    let by_parameter = search(&catalogue, "attendees", all);
    assert_eq!(by_parameter.found[0].exposed, "calendar__createEvent");
    let by_name = search(&catalogue, "billing__refundPayment", all);
    assert_eq!(by_name.found[0].exposed, "billing__refundPayment");
}

#[test]
fn a_query_is_read_however_a_small_model_writes_it() {
    assert_eq!(query_of(&json!({"query": " refund "})), "refund");
    assert_eq!(query_of(&json!({"q": "refund"})), "refund");
    assert_eq!(query_of(&json!("refund")), "refund");
    assert_eq!(query_of(&json!({"limit": 3})), "");
}
