//! Text as the search index and its queries see it: identifiers split where their
//! words meet (`getCustomerById`, `list_open_tickets`, `HTTPRequest`), everything in
//! lower case, the words that say nothing about a tool left out, and each word cut to
//! its stem (Snowball's English stemmer) so that "cancelled", "cancellation" and
//! "cancel" meet.

use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// English words that carry no meaning for choosing a tool: grammar, politeness, and
/// the words of asking. Verbs that tell tools apart ("list", "create", "cancel") stay:
/// BM25's inverse document frequency weighs the common ones down by itself.
#[rustfmt::skip]
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "before", "being", "but", "by", "can", "could", "did", "do", "does", "doing", "done",
    "for", "from", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his",
    "how", "i", "if", "in", "into", "is", "it", "its", "just", "let", "lets", "me", "might",
    "my", "myself", "need", "needs", "of", "off", "on", "onto", "or", "our", "ours", "please",
    "s", "shall", "she", "should", "so", "some", "than", "that", "the", "their", "theirs",
    "them", "then", "there", "these", "they", "this", "those", "to", "too", "up", "us", "very",
    "want", "wants", "was", "we", "were", "what", "when", "where", "whether", "which", "while",
    "who", "whom", "whose", "why", "will", "with", "would", "you", "your", "yours",
    // Indefinite pronouns, and what is left of contractions ("we're", "I'd").
    "anyone", "anybody", "anything", "someone", "somebody", "something", "everyone",
    "everybody", "everything", "re", "ll", "ve", "d", "t", "m",
];

/// Words that mean much the same in what people ask of tools: the verbs of making,
/// finding, changing and removing things, and a few nouns every catalogue names its
/// own way. Plain English, no product's vocabulary. A query's word also finds its
/// group's other words, at half weight.
#[rustfmt::skip]
const RELATED: &[&[&str]] = &[
    &["add", "create", "new", "make", "insert", "register"],
    &["find", "search", "look", "lookup", "locate"],
    &["delete", "remove", "erase", "discard", "trash"],
    &["change", "update", "edit", "modify", "alter"],
    &["show", "list", "view", "display"],
    &["get", "fetch", "retrieve", "open", "read"],
    &["send", "email", "mail", "notify"],
    &["book", "booking", "reserve", "reservation"],
    &["bill", "invoice"],
    &["doc", "document", "page"],
    &["employee", "staff", "colleague", "person", "people"],
];

/// How much a related word counts beside the word the query has.
const RELATED_WEIGHT: f64 = 0.5;

/// The terms of a query, each with its weight: its own words at 1, the words related
/// to them at [`RELATED_WEIGHT`].
pub(super) fn query_terms(text: &str) -> Vec<(String, f64)> {
    let own = terms(text);
    let mut weighted: Vec<(String, f64)> = own.iter().map(|t| (t.clone(), 1.0)).collect();
    for term in &own {
        for group in RELATED {
            let stems: Vec<String> = group.iter().map(|w| STEMMER.stem(w).into_owned()).collect();
            if stems.contains(term) {
                weighted.extend(
                    stems
                        .into_iter()
                        .filter(|s| !own.contains(s))
                        .map(|s| (s, RELATED_WEIGHT)),
                );
            }
        }
    }
    weighted
}

/// The words of `text`, each as its stem; stop words left out.
pub(super) fn terms(text: &str) -> Vec<String> {
    split(text)
        .into_iter()
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .map(|w| STEMMER.stem(&w).into_owned())
        .collect()
}

/// Lower-case words: runs of letters or of digits, split also where an identifier's
/// words meet (a lower-case letter then an upper-case one; the last capital of a run
/// of capitals that a lower-case letter follows).
fn split(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (at, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            flush(&mut word, &mut words);
            continue;
        }
        if let Some(&before) = at.checked_sub(1).and_then(|b| chars.get(b)) {
            let after = chars.get(at + 1).copied();
            let camel = before.is_lowercase() && c.is_uppercase();
            let acronym_ends =
                before.is_uppercase() && c.is_uppercase() && after.is_some_and(char::is_lowercase);
            let digits_meet = before.is_ascii_digit() != c.is_ascii_digit();
            if camel || acronym_ends || digits_meet {
                flush(&mut word, &mut words);
            }
        }
        word.extend(c.to_lowercase());
    }
    flush(&mut word, &mut words);
    words
}

fn flush(word: &mut String, words: &mut Vec<String>) {
    if !word.is_empty() {
        words.push(std::mem::take(word));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_where_their_words_meet() {
        assert_eq!(split("getCustomerById"), ["get", "customer", "by", "id"]);
        assert_eq!(split("list_open_tickets"), ["list", "open", "tickets"]);
        assert_eq!(split("parseHTTPRequest"), ["parse", "http", "request"]);
        assert_eq!(split("crm__find-contact"), ["crm", "find", "contact"]);
        assert_eq!(split("top10Customers"), ["top", "10", "customers"]);
        assert_eq!(split("Réservation à 19h"), ["réservation", "à", "19", "h"]);
    }

    #[test]
    fn related_words_count_half() {
        let weighted = query_terms("add a contact");
        assert!(weighted.contains(&("add".to_owned(), 1.0)));
        assert!(weighted.contains(&("contact".to_owned(), 1.0)));
        assert!(weighted.contains(&("creat".to_owned(), RELATED_WEIGHT)));
        assert!(!weighted.contains(&("add".to_owned(), RELATED_WEIGHT)));
    }

    #[test]
    fn forms_of_a_word_meet_and_stop_words_go() {
        assert_eq!(terms("cancelled"), terms("cancel"));
        assert_eq!(terms("cancellation"), terms("cancel"));
        assert_eq!(terms("Bookings"), terms("booking"));
        assert_eq!(terms("invoices"), terms("invoicing"));
        assert_eq!(
            terms("Can you please show me the open tickets?"),
            ["show", "open", "ticket"]
        );
    }
}
