//! A JSON result cut short (by the gateway's output cap, or a server that stopped
//! mid-answer), read as far as it goes: the values that arrived whole are kept and the
//! arrays and objects left open are closed, so the answer can still show records
//! instead of quoting broken JSON.

use serde_json::Value;

/// Cut points tried, latest first, before giving up.
const MAX_TRIES: usize = 64;

/// The longest readable prefix of `text` as JSON, closed; `None` when `text` does not
/// start like JSON or nothing whole arrived.
pub(super) fn salvage(text: &str) -> Option<Value> {
    let text = without_marker(text.trim());
    if !text.starts_with(['{', '[']) {
        return None;
    }
    let mut cuts: Vec<(usize, Vec<char>)> = Vec::new();
    let mut open: Vec<char> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for (at, c) in text.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => open.push(c),
            '}' | ']' => {
                open.pop();
                if open.is_empty() {
                    // Whole after all: nothing was cut inside it.
                    return serde_json::from_str(&text[..=at]).ok();
                }
                cuts.push((at + 1, open.clone()));
            }
            // Before a comma, the member or element ahead of it is whole.
            ',' => cuts.push((at, open.clone())),
            _ => {}
        }
    }
    cuts.iter().rev().take(MAX_TRIES).find_map(|(at, open)| {
        let closers: String = open
            .iter()
            .rev()
            .map(|c| if *c == '{' { '}' } else { ']' })
            .collect();
        serde_json::from_str(&format!("{}{closers}", &text[..*at])).ok()
    })
}

/// The text without a last line that only says it was cut (`…[output truncated…]`).
fn without_marker(text: &str) -> &str {
    match text.rsplit_once('\n') {
        Some((body, last)) if last.starts_with('…') || last.starts_with("...") => body,
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_the_records_that_arrived_whole() {
        let full = json!({"items": [
            {"name": "A", "tags": ["x", "y"], "note": "a, b"},
            {"name": "B", "tags": [], "note": "c}"},
            {"name": "C", "tags": ["z"], "note": "d"}
        ], "total": 3})
        .to_string();
        let cut = &full[..full.find("\"C\"").unwrap() + 2];
        let text = format!("{cut}\n…[output truncated: the first 80 of 200 bytes are shown]");
        let value = salvage(&text).unwrap();
        let names: Vec<&str> = value["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["A", "B"]);
        assert_eq!(
            salvage(&full).unwrap(),
            serde_json::from_str::<Value>(&full).unwrap()
        );
    }

    #[test]
    fn text_that_is_not_json_is_left_alone() {
        assert_eq!(salvage("The table is taken."), None);
        assert_eq!(salvage("{\"items\": [{\"na"), None);
    }
}
