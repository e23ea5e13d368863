//! Tool search: hundreds of tools, a small prompt (docs/tool-search.md).
//!
//! Up to `[tool_search] defer_above` tools, every tool is sent with every question,
//! as before. Past it, the tools of `auto` servers are deferred (as are those of
//! `deferred` servers at any count): the model is sent the others, pinned ones
//! among them, and the gateway's own `search_tools`. A search ranks the catalogue
//! with BM25F (`bm25.rs`, `index.rs`) over each tool's name, title, description,
//! parameter names and server, and answers with the best few, one line each; those
//! are sent as real tools from the model's next turn on (`offer.rs`), appended after
//! the tools every question gets, so the start of the prompt stays the same from
//! question to question and a provider's prompt cache keeps hitting.
//!
//! No embedding model and no network: words, their stems and how rare they are.

mod bm25;
mod found;
mod index;
mod offer;
mod words;

#[cfg(test)]
mod tests;

pub use found::{Search, query_of, search};
pub use index::ToolIndex;
pub use maitred_llm::SEARCH_TOOLS;
pub use offer::{Offered, defers, offer};
