//! Streamed tool-call fragments, put back together by `index`. Providers send the id
//! and name with the first fragment only, or repeat them in every one; arguments
//! arrive in pieces and are concatenated in order.

use std::collections::BTreeMap;

use maitred_llm::ToolCall;

#[derive(Default)]
pub(super) struct Assembler {
    calls: BTreeMap<u32, Partial>,
}

#[derive(Default)]
struct Partial {
    id: Option<String>,
    name: String,
    arguments: String,
}

impl Assembler {
    pub(super) fn push(
        &mut self,
        index: u32,
        id: Option<String>,
        name: Option<String>,
        arguments: Option<String>,
    ) {
        let call = self.calls.entry(index).or_default();
        if let Some(id) = id.filter(|id| !id.is_empty()) {
            call.id.get_or_insert(id);
        }
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            // A repeated name is the same name, not more of it.
            if !call.name.ends_with(&name) {
                call.name.push_str(&name);
            }
        }
        if let Some(arguments) = arguments {
            call.arguments.push_str(&arguments);
        }
    }

    /// The calls in index order; a call the model gave no id gets one.
    pub(super) fn finish(self, prefix: &str) -> Vec<ToolCall> {
        self.calls
            .into_iter()
            .map(|(index, call)| ToolCall {
                id: call.id.unwrap_or_else(|| format!("{prefix}-{index}")),
                name: call.name,
                arguments: call.arguments,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_fragments_make_whole_calls() {
        let mut a = Assembler::default();
        a.push(0, Some("c0".into()), Some("get".into()), Some("".into()));
        a.push(
            1,
            Some("c1".into()),
            Some("list".into()),
            Some("{\"a\"".into()),
        );
        a.push(0, None, None, Some("{\"x\":".into()));
        a.push(
            1,
            Some("c1".into()),
            Some("list".into()),
            Some(":2}".into()),
        );
        a.push(0, None, None, Some("1}".into()));
        let calls = a.finish("gen");
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (
                calls[0].id.as_str(),
                calls[0].name.as_str(),
                calls[0].arguments.as_str()
            ),
            ("c0", "get", "{\"x\":1}")
        );
        assert_eq!(
            (
                calls[1].id.as_str(),
                calls[1].name.as_str(),
                calls[1].arguments.as_str()
            ),
            ("c1", "list", "{\"a\":2}")
        );
    }

    #[test]
    fn a_call_without_an_id_gets_one() {
        let mut a = Assembler::default();
        a.push(3, None, Some("t".into()), Some("{}".into()));
        assert_eq!(a.finish("gen")[0].id, "gen-3");
    }
}
