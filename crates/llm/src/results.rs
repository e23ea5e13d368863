//! Tool results that fit a small model's prompt. A list tool can return a hundred
//! bookings, some 8,000 tokens: a small local model on two cores reads that for a
//! minute or two before its next word, and cannot use most of it anyway. For such a
//! model each result is fitted to a budget of estimated tokens: JSON is written
//! compactly and its longest lists are cut, each cut list ending with a note of how
//! many items are not shown (fields such as `total` stay, so counts stay right);
//! other text is cut at the budget, with a note. The stored result and what the
//! person sees are untouched: only what this model reads is smaller.

use serde_json::Value;

use super::budget::estimate_tokens;

/// A small model's budget per tool result when its profile names none.
pub const SMALL_MODEL_RESULT_BUDGET: u32 = 600;

/// `content` within `budget` estimated tokens (as it is when it fits).
pub fn fit(content: &str, budget: usize) -> String {
    if estimate_tokens(content) <= budget {
        return content.to_owned();
    }
    fit_json(content, budget, false)
}

/// `content` for a model that only answers from it and calls nothing more: JSON also
/// loses its `_`-prefixed fields (`_id`: a record's 24 hex characters tokenize into a
/// dozen tokens or more, and name nothing a person asked about), and is written
/// compactly even when it fits.
pub fn fit_for_answer(content: &str, budget: usize) -> String {
    fit_json(content, budget, true)
}

fn fit_json(content: &str, budget: usize, answer_only: bool) -> String {
    if let Some(mut value) = json(content) {
        drop_empty(&mut value);
        if answer_only {
            drop_private(&mut value);
        }
        loop {
            let text = value.to_string();
            if estimate_tokens(&text) <= budget {
                return text;
            }
            if !halve_longest_list(&mut value) {
                return cut(&text, budget);
            }
        }
    }
    if estimate_tokens(content) <= budget {
        return content.to_owned();
    }
    cut(content, budget)
}

/// The JSON `content` holds: whole, or, when the gateway's output cap cut it, as much
/// of it as ends at an item of a list, the lists left open closed again and the one
/// that was cut ending with a note.
fn json(content: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str(content) {
        return Some(value);
    }
    let text = content
        .rsplit_once(crate::output::TRUNCATED)
        .map_or(content, |(text, _)| text);
    let mut open: Vec<u8> = Vec::new();
    let (mut string, mut escaped) = (false, false);
    // Where the text may end: after an item of a list, and what is open there.
    let mut end: Option<(usize, Vec<u8>)> = None;
    for (at, byte) in text.bytes().enumerate() {
        if string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => string = true,
            b'[' | b'{' => open.push(byte),
            b']' | b'}' => {
                open.pop();
                if open.last() == Some(&b'[') {
                    end = Some((at + 1, open.clone()));
                }
            }
            b',' if open.last() == Some(&b'[') => end = Some((at, open.clone())),
            _ => {}
        }
    }
    let (at, open) = end?;
    let mut repaired = text[..at].to_owned();
    repaired.push_str(&format!(",\"…{MORE}\""));
    for bracket in open.iter().rev() {
        repaired.push(if *bracket == b'[' { ']' } else { '}' });
    }
    serde_json::from_str(&repaired).ok()
}

/// Leaves out `_`-prefixed fields, at any depth.
fn drop_private(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|key, _| !key.starts_with('_'));
            map.values_mut().for_each(drop_private);
        }
        Value::Array(list) => list.iter_mut().for_each(drop_private),
        _ => {}
    }
}

/// Leaves out fields that say nothing (`null`, `""`, `[]`, `{}`): a record's empty
/// fields are most of its length in many APIs.
fn drop_empty(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| {
                drop_empty(v);
                !is_empty(v)
            });
        }
        Value::Array(list) => list.iter_mut().for_each(drop_empty),
        _ => {}
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// A note ending a cut list: "… 95 more not shown".
const MORE: &str = " more not shown";

/// Halves the longest list (by its JSON's length) that still has two items or more;
/// false when there is none.
fn halve_longest_list(value: &mut Value) -> bool {
    let Some(list) = longest_list(value) else {
        return false;
    };
    let note = list.last().and_then(Value::as_str).and_then(hidden_count);
    if note.is_some() {
        list.pop();
    }
    let kept = list.len();
    let keep = kept.div_ceil(2).max(1);
    list.truncate(keep);
    let note = match note {
        // The cap cut the list: how many more there were is not known.
        Some(None) => format!("…{MORE}"),
        Some(Some(hidden)) => format!("… {}{MORE}", hidden + kept - keep),
        None => format!("… {}{MORE}", kept - keep),
    };
    list.push(Value::String(note));
    true
}

/// Whether `note` ends a cut list, and how many items it says are not shown (`None`:
/// it cannot say, the output cap cut the list).
fn hidden_count(note: &str) -> Option<Option<usize>> {
    let count = note.strip_prefix('…')?.strip_suffix(MORE)?.trim();
    if count.is_empty() {
        return Some(None);
    }
    count.parse().ok().map(Some)
}

/// Items in a list, not counting a note that ends it.
fn items(list: &[Value]) -> usize {
    let noted = list
        .last()
        .and_then(Value::as_str)
        .and_then(hidden_count)
        .is_some();
    list.len() - usize::from(noted)
}

fn longest_list(value: &mut Value) -> Option<&mut Vec<Value>> {
    // Found by path first: the borrow checker will not hand out the best of several
    // mutable borrows found on the way.
    fn find(value: &Value, path: &mut Vec<PathStep>, best: &mut Option<(usize, Vec<PathStep>)>) {
        match value {
            Value::Array(list) => {
                if items(list) >= 2 {
                    let size = value.to_string().len();
                    if best.as_ref().is_none_or(|(s, _)| size > *s) {
                        *best = Some((size, path.clone()));
                    }
                }
                for (i, item) in list.iter().enumerate() {
                    path.push(PathStep::Index(i));
                    find(item, path, best);
                    path.pop();
                }
            }
            Value::Object(map) => {
                for (key, item) in map {
                    path.push(PathStep::Key(key.clone()));
                    find(item, path, best);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    let mut best = None;
    find(value, &mut Vec::new(), &mut best);
    let (_, path) = best?;
    let mut at = value;
    for step in path {
        at = match step {
            PathStep::Index(i) => at.get_mut(i)?,
            PathStep::Key(key) => at.get_mut(key.as_str())?,
        };
    }
    at.as_array_mut()
}

#[derive(Clone)]
enum PathStep {
    Index(usize),
    Key(String),
}

/// The first `budget` tokens' worth of `text`, and a note of what is left out.
fn cut(text: &str, budget: usize) -> String {
    // In thirds of a token, as the estimate counts: a digit is three, anything else one;
    // the note takes about twenty tokens.
    let room = budget.saturating_sub(20).saturating_mul(3);
    let mut used = 0;
    let kept: String = text
        .chars()
        .take_while(|c| {
            used += if c.is_ascii_digit() { 3 } else { 1 };
            used <= room
        })
        .collect();
    let left = text.chars().count() - kept.chars().count();
    format!("{kept}… (cut here: {left} more characters not shown)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bookings(n: usize) -> Value {
        let items: Vec<Value> = (0..n)
            .map(|i| json!({ "id": format!("bk_{i:04}"), "date": "2026-11-27", "time": "19:00", "people": 2, "note": null, "tables": [], "guest": { "name": format!("Guest {i}"), "email": format!("guest{i}@example.com") } }))
            .collect();
        json!({ "items": items, "total": n, "limit": n })
    }

    #[test]
    fn a_result_that_fits_is_left_as_it_is() {
        let small = serde_json::to_string_pretty(&bookings(2)).unwrap();
        assert_eq!(fit(&small, 600), small);
    }

    #[test]
    fn a_long_list_is_cut_to_fit_and_says_how_many_are_not_shown() {
        let result = bookings(100).to_string();
        assert!(estimate_tokens(&result) > 3_000);
        let fitted = fit(&result, 600);
        assert!(estimate_tokens(&fitted) <= 600, "{fitted}");
        let value: Value = serde_json::from_str(&fitted).unwrap();
        assert_eq!(value["total"], 100, "the count stays right");
        let items = value["items"].as_array().unwrap();
        let shown = items.len() - 1;
        assert!(shown >= 3, "{fitted}");
        assert_eq!(items[0]["id"], "bk_0000", "the first items are kept");
        assert_eq!(items[0]["guest"]["name"], "Guest 0");
        assert!(
            items[0].get("note").is_none(),
            "empty fields left out: {fitted}"
        );
        assert_eq!(
            items.last().unwrap(),
            &json!(format!("… {}{MORE}", 100 - shown))
        );
    }

    #[test]
    fn an_answer_from_results_reads_them_without_ids() {
        let result = json!({ "items": [{ "_id": "5402aa7b2079589c9786484c", "name": "T01", "area": { "_id": "af5c3d895a42c7600398ca0b", "name": "Main room" } }], "total": 20 }).to_string();
        let fitted: Value = serde_json::from_str(&fit_for_answer(&result, 600)).unwrap();
        assert_eq!(
            fitted,
            json!({ "items": [{ "name": "T01", "area": { "name": "Main room" } }], "total": 20 })
        );
        // Text stays text.
        assert_eq!(fit_for_answer("20 tables", 600), "20 tables");
    }

    #[test]
    fn text_that_is_not_json_is_cut_with_a_note() {
        let text = "word ".repeat(2_000);
        let fitted = fit(&text, 100);
        assert!(estimate_tokens(&fitted) <= 100, "{}", fitted.len());
        assert!(fitted.ends_with("more characters not shown)"), "{fitted}");
    }

    #[test]
    fn json_the_output_cap_cut_is_read_to_its_last_whole_item() {
        let capped = crate::output::capped(bookings(100).to_string(), 8 * 1024);
        assert!(serde_json::from_str::<Value>(&capped).is_err());
        let fitted = fit(&capped, 600);
        let value: Value = serde_json::from_str(&fitted).unwrap();
        let items = value["items"].as_array().unwrap();
        assert_eq!(items[0]["id"], "bk_0000");
        assert_eq!(
            items.last().unwrap(),
            &json!(format!("…{MORE}")),
            "{fitted}"
        );
    }

    #[test]
    fn json_with_no_list_to_cut_is_cut_as_text() {
        let long = json!({ "comment": "x".repeat(5_000) }).to_string();
        let fitted = fit(&long, 100);
        assert!(estimate_tokens(&fitted) <= 100);
    }
}
