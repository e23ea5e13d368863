//! The questions of a run: JSON Lines, one object a line (docs/eval.md). A line that
//! is not a question is an error naming its line, so a typo is not a silent skip.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;

/// The built-in set: the restaurant's questions, across every tool the MCP server offers.
const BUILT_IN: &str = include_str!("builtin.jsonl");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Question {
    pub(super) id: String,
    pub(super) question: String,
    /// The tools that should be called (their MCP names, e.g. `getCustomers`).
    #[serde(default)]
    pub(super) tools: Vec<String>,
    pub(super) expect: Expect,
}

/// What a right answer states.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) enum Expect {
    /// The number of records the backend counts (its `x-total-count`) at run time.
    Count(Count),
    /// Text the answer holds, case aside.
    Contains(String),
    /// A regular expression the answer matches.
    Regex(String),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct Count {
    /// One of [`RESOURCES`].
    pub(super) resource: String,
    #[serde(default)]
    pub(super) custom_query: Option<String>,
    /// Further query parameters (`fromDateTime`, `toDateTime`, `onlyConfirmed`;
    /// `people`, `date` for availability); `{today}` and `{today+N}` are dates of the run.
    #[serde(default)]
    pub(super) params: BTreeMap<String, String>,
}

/// The backend's lists (counted by `x-total-count`) and its availability answers
/// (counted by their length: the dates, or a date's start times, a party can book).
pub(super) const RESOURCES: &[&str] = &[
    "customers",
    "bookings",
    "feedback",
    "tables",
    "opening-hours",
    "available-dates",
    "available-times",
];

/// The questions of `path`, or the built-in set.
pub(super) fn load(path: Option<&Path>) -> anyhow::Result<Vec<Question>> {
    match path {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the questions file {}", path.display()))?;
            parse(&text).with_context(|| format!("in {}", path.display()))
        }
        None => parse(BUILT_IN).context("in the built-in set"),
    }
}

/// One question a non-blank line; `#` starts a comment line.
pub(super) fn parse(text: &str) -> anyhow::Result<Vec<Question>> {
    let mut questions: Vec<Question> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let question: Question = serde_json::from_str(line)
            .with_context(|| format!("line {number} is not a question"))?;
        check(&question).with_context(|| format!("line {number}"))?;
        if questions.iter().any(|q| q.id == question.id) {
            bail!("line {number}: the id {:?} is used twice", question.id);
        }
        questions.push(question);
    }
    if questions.is_empty() {
        bail!("no questions");
    }
    Ok(questions)
}

fn check(question: &Question) -> anyhow::Result<()> {
    if question.id.trim().is_empty() {
        bail!("the id is empty");
    }
    if question.question.trim().is_empty() {
        bail!("the question is empty");
    }
    match &question.expect {
        Expect::Count(count) if !RESOURCES.contains(&count.resource.as_str()) => bail!(
            "expect.count.resource {:?} is none of {}",
            count.resource,
            RESOURCES.join(", ")
        ),
        Expect::Regex(pattern) => regex::Regex::new(&super::truth::dates(pattern)?)
            .map(drop)
            .with_context(|| format!("expect.regex {pattern:?} is not a regular expression")),
        Expect::Contains(text) if text.trim().is_empty() => bail!("expect.contains is empty"),
        _ => Ok(()),
    }?;
    if let Expect::Contains(text) = &question.expect {
        super::truth::dates(text)?;
    }
    super::truth::dates(&question.question).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_set_parses_and_covers_forty_questions() {
        let questions = parse(BUILT_IN).unwrap();
        assert!(questions.len() >= 40, "{}", questions.len());
    }

    #[test]
    fn a_bad_line_is_named() {
        let text =
            "{\"id\":\"a\",\"question\":\"q\",\"expect\":{\"contains\":\"x\"}}\n\n{\"id\":\"b\"}\n";
        let error = format!("{:#}", parse(text).unwrap_err());
        assert!(error.contains("line 3"), "{error}");
        let unknown =
            "{\"id\":\"a\",\"question\":\"q\",\"expect\":{\"count\":{\"resource\":\"cats\"}}}";
        let error = format!("{:#}", parse(unknown).unwrap_err());
        assert!(
            error.contains("line 1") && error.contains("cats"),
            "{error}"
        );
        let regex = "{\"id\":\"a\",\"question\":\"q\",\"expect\":{\"regex\":\"(\"}}";
        assert!(format!("{:#}", parse(regex).unwrap_err()).contains("regular expression"));
    }
}
