//! Words for matching a question against tools: identifiers and sentences split into
//! lowercase words, crudely stemmed so that "tables", "table" and "tabled" meet, with
//! the words that say nothing about a tool left out.

use std::collections::BTreeSet;
use std::sync::LazyLock;

/// Words that carry no meaning for choosing a tool: grammar, politeness, the verbs of
/// asking ("show", "list", "get"), paging vocabulary every list tool shares, and the
/// words of dates and times (those become argument values, not topics).
const STOP_WORDS: &str = "a about after all also am an and any are as at be been before being \
    but by can check could count day default display do does done e each eg else etc every \
    example false fetch find for from g get give had has have here how i if in into is it its \
    just know let lets like list look lookup many may me might more most much must my need \
    next no not now null number of on one only or other our out please pm read record result \
    retrieve s see shall should show so some tell than that the their them then there these \
    they this those to today tomorrow tonight too total true up us use very want was we week \
    were what when where which who whom whose why will with would yesterday you your";

pub const WEEKDAYS: &[&str] = &[
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// Month names with their common abbreviations, by month number less one.
pub(super) const MONTHS: &[&[&str]] = &[
    &["january", "jan"],
    &["february", "feb"],
    &["march", "mar"],
    &["april", "apr"],
    &["may"],
    &["june", "jun"],
    &["july", "jul"],
    &["august", "aug"],
    &["september", "sep", "sept"],
    &["october", "oct"],
    &["november", "nov"],
    &["december", "dec"],
];

/// Verbs that ask for a change, grouped by meaning, so that "reserve" finds a tool
/// that says "book" and "confirm" finds a status called "approved".
pub(super) const ACTION_GROUPS: &[&str] = &[
    "book reserve",
    "create add make register insert submit place",
    "cancel annul",
    "update change modify edit reschedule move set rename",
    "delete remove erase drop",
    "approve confirm accept",
    "decline reject refuse deny",
    "mark flag",
    "send notify",
];

/// Words that mean much the same when they describe a field, so that "guests" finds
/// `people`, "spending" finds `totalSpent` and "cheapest" finds `unit_cost`. Plain
/// English, no domain's field names.
const RELATED_GROUPS: &[&str] = &[
    "people person guest diner cover pax party size seat capacity",
    "spent spend spending spender paid pay money revenue",
    "rating rated rate star score best worst",
    "price cost costing expensive cheap cheaper cheapest pricey",
    "quantity stock qty amount",
    "created made added placed submitted new newest",
    "expire expiry expiring",
    "visit visited",
    "name named called titled",
];

/// Words that only measure a number ("10 units", "500 euros"): they say nothing about
/// which field is meant.
const MEASURE_WORDS: &str = "unit units piece pieces pcs times euro euros eur dollar dollars usd     kr krone kroner pound pounds percent";

/// The stems that mean much the same as `stem`, not `stem` itself.
pub(super) fn related(wanted: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for group in RELATED_GROUPS {
        let stems: Vec<String> = group.split_whitespace().map(stem).collect();
        if stems.iter().any(|s| s == wanted) {
            out.extend(stems.into_iter().filter(|s| s != wanted));
        }
    }
    out.sort();
    out.dedup();
    out
}

pub(super) fn is_measure_word(word: &str) -> bool {
    listed(MEASURE_WORDS, word)
}

/// Keys whose value names a record.
const NAME_WORDS: &str = "name title label subject fullname headline";

pub(super) fn is_name_like(key: &str) -> bool {
    split_words(key)
        .last()
        .is_some_and(|w| listed(NAME_WORDS, w.as_str()))
}

/// Whether a word is one of a whitespace-separated list.
pub(super) fn listed(list: &str, word: &str) -> bool {
    list.split_whitespace().any(|w| w == word)
}

fn listed_stem(list: &str, wanted: &str) -> bool {
    list.split_whitespace().any(|w| stem(w) == wanted)
}

pub(super) fn is_stop_word(word: &str) -> bool {
    static STOPS: LazyLock<BTreeSet<&str>> =
        LazyLock::new(|| STOP_WORDS.split_whitespace().collect());
    STOPS.contains(word) || WEEKDAYS.contains(&word) || month_number(word).is_some()
}

/// 1-based month number of a month name or abbreviation.
pub fn month_number(word: &str) -> Option<u32> {
    MONTHS
        .iter()
        .position(|names| names.contains(&word))
        .and_then(|i| u32::try_from(i + 1).ok())
}

/// The stems of the action group a raw word belongs to, the word's own first.
pub(super) fn action_synonyms(word: &str) -> Option<Vec<String>> {
    let group = ACTION_GROUPS.iter().find(|group| listed(group, word))?;
    let mut stems = vec![stem(word)];
    stems.extend(
        group
            .split_whitespace()
            .map(stem)
            .filter(|s| *s != stem(word)),
    );
    Some(stems)
}

/// Whether two stems mean the same action ("confirm" and "approv").
pub(super) fn same_action(a: &str, b: &str) -> bool {
    a == b
        || ACTION_GROUPS
            .iter()
            .any(|group| listed_stem(group, a) && listed_stem(group, b))
}

/// Splits identifiers and prose into lowercase words: `server__getCustomerById`,
/// `snake_case`, `kebab-case`, `HTTPServer` and sentences alike.
pub(super) fn split_words(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut words = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            flush(&mut current, &mut words);
            continue;
        }
        if i > 0 && starts_word(chars[i - 1], c, chars.get(i + 1).copied()) {
            flush(&mut current, &mut words);
        }
        current.extend(c.to_lowercase());
    }
    flush(&mut current, &mut words);
    words
}

fn starts_word(prev: char, c: char, next: Option<char>) -> bool {
    if !prev.is_alphanumeric() {
        return false;
    }
    let camel = prev.is_lowercase() && c.is_uppercase();
    let acronym_end =
        prev.is_uppercase() && c.is_uppercase() && next.is_some_and(char::is_lowercase);
    let digits = prev.is_ascii_digit() != c.is_ascii_digit();
    camel || acronym_end || digits
}

fn flush(current: &mut String, words: &mut Vec<String>) {
    if !current.is_empty() {
        words.push(std::mem::take(current));
    }
}

/// A crude stem: plural and verb endings off, a doubled final consonant and a final
/// silent "e" dropped, so that the forms of one word usually meet.
pub(super) fn stem(word: &str) -> String {
    let word = word.to_lowercase();
    if word.chars().count() <= 3 || !word.chars().all(|c| c.is_ascii_alphabetic()) {
        return word;
    }
    let mut base = strip_ending(&word);
    if base.len() > 3 {
        let bytes = base.as_bytes();
        let (a, b) = (bytes[bytes.len() - 2], bytes[bytes.len() - 1]);
        if a == b && !is_vowel(b) {
            base.pop();
        }
    }
    if base.len() > 4 && base.ends_with('e') {
        base.pop();
    }
    base
}

/// The singular, then without "-ing" or "-ed": "bookings" and "booked" both give "book".
fn strip_ending(word: &str) -> String {
    let singular = strip_plural(word);
    strip_verb_ending(&singular).unwrap_or(singular)
}

fn strip_plural(word: &str) -> String {
    if let Some(base) = word.strip_suffix("ies").filter(|b| b.len() >= 2) {
        return format!("{base}y");
    }
    if let Some(base) = word.strip_suffix("es")
        && (base.ends_with(['s', 'x', 'z']) || base.ends_with("ch") || base.ends_with("sh"))
    {
        return base.to_owned();
    }
    match word.strip_suffix('s') {
        Some(base) if base.len() >= 3 && !base.ends_with(['s', 'u', 'i']) => base.to_owned(),
        _ => word.to_owned(),
    }
}

fn strip_verb_ending(word: &str) -> Option<String> {
    ["ing", "ed"].iter().find_map(|ending| {
        let base = word.strip_suffix(ending)?;
        let stems = base.len() >= 3 && base.bytes().any(is_vowel) && !word.ends_with("eed");
        stems.then(|| base.to_owned())
    })
}

fn is_vowel(b: u8) -> bool {
    matches!(b, b'a' | b'e' | b'i' | b'o' | b'u' | b'y')
}

/// The stems of a text's meaningful words: no stop words, no numbers, no single letters.
pub(super) fn content_stems(text: &str) -> BTreeSet<String> {
    split_words(text)
        .into_iter()
        .filter(|w| w.len() > 1 && !w.chars().all(|c| c.is_ascii_digit()) && !is_stop_word(w))
        .map(|w| stem(&w))
        .filter(|s| !is_stop_word(s))
        .collect()
}

/// An identifier as words a reader can take in: `lastBookingAt` → "Last booking at".
pub(super) fn humanize(identifier: &str) -> String {
    let words = split_words(identifier).join(" ");
    let mut chars = words.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => identifier.to_owned(),
    }
}

/// The part of a tool name after the server prefix (`server__tool` → `tool`).
pub(super) fn bare_tool_name(name: &str) -> &str {
    name.rsplit("__").next().unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_identifiers_and_prose() {
        assert_eq!(
            split_words("resos__getCustomerById"),
            ["resos", "get", "customer", "by", "id"]
        );
        assert_eq!(
            split_words("HTTPServer no_show T01"),
            ["http", "server", "no", "show", "t", "01"]
        );
        assert_eq!(
            split_words("the restaurant's tables"),
            ["the", "restaurant", "s", "tables"]
        );
    }

    #[test]
    fn forms_of_a_word_share_a_stem() {
        for (a, b) in [
            ("tables", "table"),
            ("booking", "book"),
            ("canceled", "cancelling"),
            ("times", "time"),
            ("categories", "category"),
            ("approved", "approve"),
            ("addresses", "address"),
            ("updating", "update"),
            ("bookings", "booked"),
            ("settings", "set"),
        ] {
            assert_eq!(stem(a), stem(b), "{a} / {b}");
        }
        assert_eq!(stem("status"), "status");
        assert_eq!(stem("string"), "string");
    }

    #[test]
    fn humanizes_identifiers() {
        assert_eq!(humanize("lastBookingAt"), "Last booking at");
        assert_eq!(humanize("_id"), "Id");
        assert!(same_action(&stem("confirm"), &stem("approved")));
    }
}
