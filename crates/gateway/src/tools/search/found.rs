//! One search: what the model asked for, the tools found, and how they are told to
//! the model (a line each, which the next turns read back to know what is loaded)
//! and to the person (the search's card).

use std::sync::Arc;

use serde_json::Value;

use crate::tools::{Catalogue, RegisteredTool};

/// What the model reads before each tool found.
const ITEM: &str = "- ";
/// A description is cut to its first sentence, at most this long.
const DESCRIPTION_CHARS: usize = 160;

/// A search and what it found, best first.
pub struct Search {
    pub query: String,
    pub found: Vec<Arc<RegisteredTool>>,
}

/// The best tools for `query` among those the person may use (`allows`).
pub fn search(
    catalogue: &Catalogue,
    query: &str,
    allows: impl Fn(&RegisteredTool) -> bool,
) -> Search {
    let found = catalogue
        .index()
        .search(query, catalogue.search.results, |at| {
            catalogue.tools.get(at).is_some_and(|t| allows(t))
        })
        .into_iter()
        .filter_map(|at| catalogue.tools.get(at).cloned())
        .collect();
    Search {
        query: query.to_owned(),
        found,
    }
}

/// The query in a search's arguments: `query`, or whatever text the model gave
/// instead (a small model may name the field otherwise, or send a bare string).
pub fn query_of(arguments: &Value) -> String {
    match arguments {
        Value::String(text) => text.trim().to_owned(),
        Value::Object(fields) => match fields.get("query").and_then(Value::as_str) {
            Some(query) => query.trim().to_owned(),
            None => fields
                .values()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" ")
                .trim()
                .to_owned(),
        },
        _ => String::new(),
    }
}

impl Search {
    /// What the model is told: the tools found, a line each, and that it may call
    /// them now.
    pub fn for_model(&self) -> String {
        if self.query.is_empty() {
            return "Error: say what the tool should do, in a few words, as the query \
                    (for example {\"query\": \"refund an invoice\"})."
                .to_owned();
        }
        if self.found.is_empty() {
            return format!(
                "No tool matches \"{}\". Search again with other words (what the tool does, or \
                 the system it belongs to), or answer without a tool.",
                self.query
            );
        }
        let mut text = format!("Tools for \"{}\", best first:\n", self.query);
        for tool in &self.found {
            text.push_str(&format!(
                "{ITEM}{}: {}\n",
                tool.exposed,
                about(&tool.title, &tool.def.description)
            ));
        }
        text.push_str(
            "They are available to call from now on: call the one that fits, with the \
             arguments it needs.",
        );
        text
    }

    /// What the person's card says of it: the tools found, by title.
    pub fn summary(&self) -> String {
        if self.found.is_empty() {
            return "no tool found".to_owned();
        }
        let titles: Vec<String> = self
            .found
            .iter()
            .map(|t| format!("{} ({})", t.title, t.server))
            .collect();
        format!("found {}: {}", self.found.len(), titles.join(", "))
    }
}

/// The names of the tools a search's answer (`for_model`) lists, in its order.
pub(super) fn listed(answer: &str) -> impl Iterator<Item = &str> {
    answer.lines().filter_map(|line| {
        let (name, _) = line.strip_prefix(ITEM)?.split_once(": ")?;
        Some(name)
    })
}

/// "Title. First sentence of the description."
fn about(title: &str, description: &str) -> String {
    let line = description
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim();
    let sentence = line.find(". ").map_or(line, |end| &line[..=end]);
    let sentence = if sentence.chars().count() > DESCRIPTION_CHARS {
        let kept: String = sentence.chars().take(DESCRIPTION_CHARS - 1).collect();
        format!("{}…", kept.trim_end())
    } else {
        sentence.to_owned()
    };
    if sentence.is_empty() {
        format!("{title}.")
    } else {
        format!("{title}. {sentence}")
    }
}
