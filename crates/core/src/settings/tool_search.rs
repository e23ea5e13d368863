//! How many tools are sent to the model, and how the others are found: per server in
//! `[[mcp_servers]]` (`offer`, `pinned`), for the whole gateway in `[tool_search]`.
//!
//! ```toml
//! [tool_search]
//! defer_above = 40     # more directly offered tools than this: "auto" servers' are searched for
//! results = 5          # tools a search returns (and loads for the next step)
//!
//! [[mcp_servers]]
//! name = "crm"
//! url = "https://crm.example.com/mcp"
//! offer = "deferred"              # "auto" (default), "always", "deferred" or "never"
//! pinned = ["searchContacts"]     # sent with every question whatever `offer` says (* as a wildcard)
//! ```

use anyhow::bail;
use serde::Deserialize;

/// How a server's tools reach the model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Offer {
    /// Sent with every question while the tools sent directly number at most
    /// `defer_above`; past that, found through the search tool.
    #[default]
    Auto,
    /// Sent with every question, however many tools there are.
    Always,
    /// Found through the search tool only (but for its pinned tools).
    Deferred,
    /// Neither sent nor found nor called (but for its pinned tools).
    Never,
}

/// The gateway's `[tool_search]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolSearch {
    /// While the tools that would be sent directly (of `auto` and `always` servers,
    /// and pinned ones) number at most this, every `auto` server's tools are sent;
    /// past it, they are deferred. maitred's own server has 16 tools.
    pub defer_above: usize,
    /// How many tools one search returns and loads.
    pub results: usize,
}

/// Deferring starts well above maitred's own 16 tools and a second server of the same
/// size, and well below the ~100 where a small model's context is mostly definitions.
pub const DEFAULT_DEFER_ABOVE: usize = 40;
/// Five: a search rarely misses the right tool in its top five, and five full
/// definitions still fit a small model's tool budget.
pub const DEFAULT_RESULTS: usize = 5;
/// Past this, a search is a catalogue dump again.
const MAX_RESULTS: usize = 20;

impl Default for ToolSearch {
    fn default() -> Self {
        Self {
            defer_above: DEFAULT_DEFER_ABOVE,
            results: DEFAULT_RESULTS,
        }
    }
}

impl ToolSearch {
    pub fn check(&self) -> anyhow::Result<()> {
        if self.results == 0 || self.results > MAX_RESULTS {
            bail!("tool_search.results must be between 1 and {MAX_RESULTS}");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_defer_above_forty_and_return_five() {
        let parsed: ToolSearch = toml::from_str("").unwrap();
        assert_eq!(parsed, ToolSearch::default());
        assert_eq!((parsed.defer_above, parsed.results), (40, 5));
    }

    #[test]
    fn results_out_of_range_are_refused() {
        for results in [0, 21] {
            let settings = ToolSearch {
                results,
                ..ToolSearch::default()
            };
            assert!(settings.check().is_err(), "{results}");
        }
    }

    #[test]
    fn offers_are_read_in_lower_case() {
        #[derive(Deserialize)]
        struct Server {
            offer: Offer,
        }
        for (text, offer) in [
            ("auto", Offer::Auto),
            ("always", Offer::Always),
            ("deferred", Offer::Deferred),
            ("never", Offer::Never),
        ] {
            let server: Server = toml::from_str(&format!("offer = \"{text}\"")).unwrap();
            assert_eq!(server.offer, offer);
        }
        assert!(toml::from_str::<Server>("offer = \"sometimes\"").is_err());
    }
}
