//! The report: report.json for machines, report.md for people, both written whole
//! after every answer (to a temporary file, then renamed), so a run that is killed
//! keeps every answer it had.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Serialize)]
pub(super) struct Report {
    /// The model the gateway answered with (its `meta` event's).
    pub(super) model: String,
    pub(super) gateway: String,
    pub(super) started_at: String,
    pub(super) repeat: u32,
    pub(super) summary: Summary,
    pub(super) questions: Vec<QuestionReport>,
}

#[derive(Debug, Serialize)]
pub(super) struct QuestionReport {
    pub(super) id: String,
    pub(super) question: String,
    pub(super) expect: Value,
    pub(super) expected_tools: Vec<String>,
    /// The first run's, flattened for a run without --repeat.
    pub(super) answer: String,
    pub(super) right: bool,
    pub(super) tools_called: Vec<String>,
    /// Every expected tool was called; `null` when the question names none.
    pub(super) tool_right: Option<bool>,
    pub(super) unsupported: Vec<String>,
    pub(super) runs: Vec<Run>,
    /// With --repeat: how many runs were right, and how many gave the same verdict
    /// and the same tools as the most common one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) consistency: Option<Consistency>,
}

#[derive(Debug, Clone, Serialize)]
pub(super) struct Run {
    pub(super) answer: String,
    pub(super) right: bool,
    /// The count the backend gave when the question was asked (count questions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) truth: Option<u64>,
    pub(super) tools_called: Vec<String>,
    pub(super) tool_right: Option<bool>,
    /// Expected tools that were not called.
    pub(super) missing_tools: Vec<String>,
    /// The answer's figures no tool result states (its `grounding` event).
    pub(super) unsupported: Vec<String>,
    pub(super) failed_calls: usize,
    pub(super) first_token_ms: Option<u64>,
    pub(super) total_ms: u64,
    pub(super) prompt_tokens: u64,
    pub(super) completion_tokens: u64,
    pub(super) finish: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<String>,
}

#[derive(Debug, Serialize)]
pub(super) struct Consistency {
    pub(super) runs: usize,
    pub(super) right: usize,
    /// Runs whose tools called were the most common list of tools.
    pub(super) same_tools: usize,
    /// The share of runs that agree with the majority verdict (1.0: always the same).
    pub(super) agreement: f64,
}

#[derive(Debug, Default, Serialize)]
pub(super) struct Summary {
    pub(super) questions: usize,
    pub(super) runs: usize,
    /// Runs judged right.
    pub(super) answer_right: usize,
    /// Runs that called every expected tool, of `tool_expected`.
    pub(super) tool_right: usize,
    pub(super) tool_expected: usize,
    /// Figures no tool result states, over every run.
    pub(super) unsupported_figures: usize,
    pub(super) answers_with_unsupported: usize,
    pub(super) errors: usize,
    pub(super) first_token_ms: Percentiles,
    pub(super) total_ms: Percentiles,
    pub(super) prompt_tokens: u64,
    pub(super) completion_tokens: u64,
}

#[derive(Debug, Default, Serialize)]
pub(super) struct Percentiles {
    pub p50: Option<u64>,
    pub p90: Option<u64>,
    pub(super) max: Option<u64>,
}

impl Percentiles {
    /// Nearest-rank percentiles.
    fn of(mut values: Vec<u64>) -> Self {
        values.sort_unstable();
        let rank = |p: f64| {
            let n = values.len();
            (n > 0).then(|| values[((p * n as f64).ceil() as usize).clamp(1, n) - 1])
        };
        Self {
            p50: rank(0.5),
            p90: rank(0.9),
            max: values.last().copied(),
        }
    }
}

impl QuestionReport {
    pub(super) fn add(&mut self, run: Run) {
        if self.runs.is_empty() {
            self.answer = run.answer.clone();
            self.right = run.right;
            self.tools_called = run.tools_called.clone();
            self.tool_right = run.tool_right;
            self.unsupported = run.unsupported.clone();
        }
        self.runs.push(run);
        if self.runs.len() > 1 {
            self.consistency = Some(consistency(&self.runs));
        }
    }
}

fn consistency(runs: &[Run]) -> Consistency {
    let right = runs.iter().filter(|r| r.right).count();
    let mut tool_lists: Vec<(&Vec<String>, usize)> = Vec::new();
    for run in runs {
        match tool_lists.iter_mut().find(|(t, _)| **t == run.tools_called) {
            Some((_, n)) => *n += 1,
            None => tool_lists.push((&run.tools_called, 1)),
        }
    }
    let same_tools = tool_lists.iter().map(|(_, n)| *n).max().unwrap_or(0);
    Consistency {
        runs: runs.len(),
        right,
        same_tools,
        agreement: right.max(runs.len() - right) as f64 / runs.len() as f64,
    }
}

impl Report {
    pub(super) fn summarise(&mut self) {
        let runs: Vec<&Run> = self.questions.iter().flat_map(|q| &q.runs).collect();
        self.summary = Summary {
            questions: self.questions.len(),
            runs: runs.len(),
            answer_right: runs.iter().filter(|r| r.right).count(),
            tool_right: runs.iter().filter(|r| r.tool_right == Some(true)).count(),
            tool_expected: runs.iter().filter(|r| r.tool_right.is_some()).count(),
            unsupported_figures: runs.iter().map(|r| r.unsupported.len()).sum(),
            answers_with_unsupported: runs.iter().filter(|r| !r.unsupported.is_empty()).count(),
            errors: runs.iter().filter(|r| r.error.is_some()).count(),
            first_token_ms: Percentiles::of(runs.iter().filter_map(|r| r.first_token_ms).collect()),
            total_ms: Percentiles::of(runs.iter().map(|r| r.total_ms).collect()),
            prompt_tokens: runs.iter().map(|r| r.prompt_tokens).sum(),
            completion_tokens: runs.iter().map(|r| r.completion_tokens).sum(),
        };
    }

    /// report.json and report.md in `dir`, each replaced whole.
    pub(super) fn write(&mut self, dir: &Path) -> anyhow::Result<()> {
        self.summarise();
        let json = serde_json::to_string_pretty(self).context("encoding the report")?;
        replace(&dir.join("report.json"), &json)?;
        replace(&dir.join("report.md"), &self.markdown())
    }

    fn markdown(&self) -> String {
        let s = &self.summary;
        let ms = |v: Option<u64>| v.map_or("–".to_owned(), |v| format!("{v} ms"));
        let mut md = String::new();
        let _ = writeln!(md, "# maitred eval: {}\n", self.model);
        let _ = writeln!(
            md,
            "Gateway {}, started {}, each question asked {} time(s).\n",
            self.gateway, self.started_at, self.repeat
        );
        let _ = writeln!(md, "| | |\n|---|---|");
        let _ = writeln!(md, "| questions | {} ({} runs) |", s.questions, s.runs);
        let _ = writeln!(md, "| answers right | {} of {} |", s.answer_right, s.runs);
        let _ = writeln!(
            md,
            "| right tools | {} of {} |",
            s.tool_right, s.tool_expected
        );
        let _ = writeln!(
            md,
            "| unsupported figures | {} (in {} answers) |",
            s.unsupported_figures, s.answers_with_unsupported
        );
        let _ = writeln!(md, "| errors | {} |", s.errors);
        let _ = writeln!(
            md,
            "| first token p50 / p90 / max | {} / {} / {} |",
            ms(s.first_token_ms.p50),
            ms(s.first_token_ms.p90),
            ms(s.first_token_ms.max)
        );
        let _ = writeln!(
            md,
            "| in all p50 / p90 / max | {} / {} / {} |",
            ms(s.total_ms.p50),
            ms(s.total_ms.p90),
            ms(s.total_ms.max)
        );
        let _ = writeln!(
            md,
            "| tokens (prompt / completion) | {} / {} |\n",
            s.prompt_tokens, s.completion_tokens
        );
        let _ = writeln!(
            md,
            "| id | right | tools | unsupported | in all | answer |\n|---|---|---|---|---|---|"
        );
        for q in &self.questions {
            let mut right = if q.right { "yes" } else { "no" }.to_owned();
            if let Some(c) = &q.consistency {
                right = format!("{} of {}", c.right, c.runs);
            }
            let tools = match q.tool_right {
                Some(true) => format!("✓ {}", q.tools_called.join(", ")),
                Some(false) => format!("✗ {}", q.tools_called.join(", ")),
                None => q.tools_called.join(", "),
            };
            let total = q.runs.first().map_or(0, |r| r.total_ms);
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} ms | {} |",
                cell(&q.id),
                right,
                cell(&tools),
                cell(&q.unsupported.join(", ")),
                total,
                cell(&q.answer)
            );
        }
        md
    }
}

/// Text that stays in one table cell.
fn cell(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let short: String = one_line.chars().take(200).collect();
    let more = if one_line.chars().count() > 200 {
        "…"
    } else {
        ""
    };
    format!("{}{more}", short.replace('|', "\\|"))
}

fn replace(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut temporary = PathBuf::from(path);
    temporary.set_extension("tmp");
    std::fs::write(&temporary, text)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, path).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let p = Percentiles::of((1..=10).collect());
        assert_eq!((p.p50, p.p90, p.max), (Some(5), Some(9), Some(10)));
        let none = Percentiles::of(Vec::new());
        assert_eq!(none.max, None);
    }
}
