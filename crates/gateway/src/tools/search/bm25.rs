//! BM25F: Okapi BM25 over documents made of fields, each with its weight and its own
//! length normalisation (Robertson, Zaragoza and Taylor, "Simple BM25 extension to
//! multiple weighted fields", 2004). A term's frequency is summed over the fields,
//! each weighted and normalised by that field's length against its average, and
//! saturated once: a word in a tool's name counts more than one in its description,
//! yet a description that repeats a word ten times does not beat a name that says it
//! once.
//!
//! Written here rather than taken from a crate: the BM25 crates score one text per
//! document; fields with their own weights are what ranks tools well (the name and
//! the server say far more than a long description).

use std::collections::HashMap;

/// What one field counts for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Field {
    /// How much one occurrence in this field counts.
    pub weight: f64,
    /// 0: length does not matter; 1: fully normalised by length.
    pub b: f64,
}

/// Term-frequency saturation: how soon more occurrences stop adding.
const K1: f64 = 1.2;

/// An index over documents of `F` fields, each a list of terms.
#[derive(Debug)]
pub(super) struct Bm25f<const F: usize> {
    fields: Vec<Field>,
    /// term → (document, occurrences in each field)
    postings: HashMap<String, Vec<(usize, [u32; F])>>,
    lengths: Vec<[u32; F]>,
    average: [f64; F],
}

impl<const F: usize> Bm25f<F> {
    /// The index of `documents` (each field a list of terms), in their order.
    pub(super) fn new(fields: [Field; F], documents: &[[Vec<String>; F]]) -> Self {
        let mut postings: HashMap<String, Vec<(usize, [u32; F])>> = HashMap::new();
        let mut lengths = Vec::with_capacity(documents.len());
        let mut totals = [0u64; F];
        for (doc, document) in documents.iter().enumerate() {
            let mut counts: HashMap<&str, [u32; F]> = HashMap::new();
            let mut length = [0u32; F];
            for (field, terms) in document.iter().enumerate() {
                for term in terms {
                    counts.entry(term).or_insert([0; F])[field] += 1;
                }
                length[field] = u32::try_from(terms.len()).unwrap_or(u32::MAX);
                totals[field] += u64::from(length[field]);
            }
            // Sorted, so the postings (and ties in the ranking) do not depend on
            // the order a hash map happens to keep.
            let mut counts: Vec<(&str, [u32; F])> = counts.into_iter().collect();
            counts.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (term, count) in counts {
                postings
                    .entry(term.to_owned())
                    .or_default()
                    .push((doc, count));
            }
            lengths.push(length);
        }
        let n = documents.len().max(1) as f64;
        let average = totals.map(|total| total as f64 / n);
        Self {
            fields: fields.to_vec(),
            postings,
            lengths,
            average,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Each document's score for `query` (its terms, each counted once), by document.
    #[cfg(test)]
    pub(super) fn scores(&self, query: &[String]) -> Vec<f64> {
        let weighted: Vec<(String, f64)> = query.iter().map(|t| (t.clone(), 1.0)).collect();
        self.weighted_scores(&weighted)
    }

    /// The same, each term's part in a score weighted (each term counted once, at
    /// the weight it first comes with).
    pub(super) fn weighted_scores(&self, query: &[(String, f64)]) -> Vec<f64> {
        let mut scores = vec![0.0; self.lengths.len()];
        let mut seen: Vec<&str> = Vec::new();
        let n = self.lengths.len() as f64;
        for (term, weight) in query {
            if seen.contains(&term.as_str()) {
                continue;
            }
            seen.push(term);
            let Some(postings) = self.postings.get(term) else {
                continue;
            };
            let df = postings.len() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for (doc, counts) in postings {
                let tf: f64 = (0..F)
                    .map(|f| {
                        let Field { weight, b } = self.fields[f];
                        let length = f64::from(self.lengths[*doc][f]);
                        let average = self.average[f].max(f64::MIN_POSITIVE);
                        weight * f64::from(counts[f]) / (1.0 - b + b * length / average)
                    })
                    .sum();
                scores[*doc] += weight * idf * tf / (K1 + tf);
            }
        }
        scores
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    fn index(documents: &[(&str, &str)]) -> Bm25f<2> {
        let fields = [
            Field {
                weight: 3.0,
                b: 0.3,
            },
            Field {
                weight: 1.0,
                b: 0.75,
            },
        ];
        let documents: Vec<[Vec<String>; 2]> = documents
            .iter()
            .map(|(name, body)| [words(name), words(body)])
            .collect();
        Bm25f::new(fields, &documents)
    }

    #[test]
    fn a_word_in_the_name_counts_more_than_in_the_body() {
        let index = index(&[
            ("cancel booking", "cancels a booking"),
            ("create booking", "makes a booking one can cancel later"),
        ]);
        let scores = index.scores(&words("cancel"));
        assert!(scores[0] > scores[1], "{scores:?}");
    }

    #[test]
    fn rare_words_count_more_than_common_ones() {
        let index = index(&[
            ("list invoice", "invoices"),
            ("list contact", "contacts"),
            ("list ticket", "tickets"),
        ]);
        let scores = index.scores(&words("list invoice"));
        assert!(scores[0] > 2.0 * scores[1], "{scores:?}");
        assert_eq!(scores[1], scores[2]);
    }

    #[test]
    fn repetition_saturates_and_long_fields_are_normalised() {
        let index = index(&[
            ("refund", "refund"),
            (
                "payment",
                "refund refund refund refund refund refund and more words in a long text",
            ),
        ]);
        let scores = index.scores(&words("refund"));
        assert!(scores[0] > scores[1], "{scores:?}");
    }

    #[test]
    fn unknown_words_and_repeated_query_words_change_nothing() {
        let index = index(&[("ship order", "ships an order"), ("track parcel", "")]);
        assert_eq!(
            index.scores(&words("ship")),
            index.scores(&words("ship ship unheard"))
        );
        assert_eq!(index.scores(&words("unheard")), vec![0.0, 0.0]);
    }
}
