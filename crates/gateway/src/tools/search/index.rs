//! The search index of a catalogue: each tool a document of five fields, ranked by
//! BM25F. Built once per catalogue (a discovery that changed something makes a new
//! catalogue, hence a new index), in a few milliseconds for hundreds of tools.

use std::sync::Arc;

use super::bm25::{Bm25f, Field};
use super::words::{query_terms, terms};
use crate::tools::catalogue::{RegisteredTool, humanize};

/// The fields of a tool, in the order the index keeps them.
const FIELDS: [Field; 5] = [
    // The tool's own name (without its server), split into words: what it does.
    Field {
        weight: 3.0,
        b: 0.3,
    },
    // The title the server gave it, when it says more than the name.
    Field {
        weight: 2.0,
        b: 0.3,
    },
    // Its description.
    Field {
        weight: 1.0,
        b: 0.75,
    },
    // Its parameters' names and enumerated values: what it takes.
    Field {
        weight: 1.0,
        b: 0.5,
    },
    // Its server's name: which system it belongs to.
    Field {
        weight: 1.5,
        b: 0.0,
    },
];

#[derive(Debug)]
pub struct ToolIndex {
    bm25: Bm25f<5>,
}

impl ToolIndex {
    pub fn new(tools: &[Arc<RegisteredTool>]) -> Self {
        let documents: Vec<[Vec<String>; 5]> = tools.iter().map(|t| document(t)).collect();
        Self {
            bm25: Bm25f::new(FIELDS, &documents),
        }
    }

    /// The positions of the best `k` tools for `query` among those `usable` (by
    /// position), best first; ties keep the catalogue's order. Tools that share no
    /// word with the query are not found.
    pub fn search(&self, query: &str, k: usize, usable: impl Fn(usize) -> bool) -> Vec<usize> {
        let scores = self.bm25.weighted_scores(&query_terms(query));
        let mut ranked: Vec<(usize, f64)> = scores
            .into_iter()
            .enumerate()
            .filter(|(at, score)| *score > 0.0 && usable(*at))
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.into_iter().take(k).map(|(at, _)| at).collect()
    }

    pub fn len(&self) -> usize {
        self.bm25.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A tool's fields as terms.
fn document(tool: &RegisteredTool) -> [Vec<String>; 5] {
    // A title made from the name says nothing the name does not.
    let title = if tool.title.eq_ignore_ascii_case(&humanize(&tool.tool)) {
        Vec::new()
    } else {
        terms(&tool.title)
    };
    // Their names, and the values of those that take one of a few ("overdue",
    // "urgent"): what a question names that a description may not.
    let parameters = tool.def.parameters["properties"]
        .as_object()
        .map(|properties| {
            properties
                .iter()
                .flat_map(|(name, property)| {
                    let values = property["enum"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str());
                    terms(name).into_iter().chain(values.flat_map(terms))
                })
                .collect::<Vec<String>>()
        })
        .unwrap_or_default();
    [
        terms(&tool.tool),
        title,
        terms(&tool.def.description),
        parameters,
        terms(&tool.server),
    ]
}
