//! Truths counted at run time: the backend's `x-total-count` for a list, with the
//! eval's own client token, so a count question is judged against the data as it is
//! when asked, never against a number written down.

use anyhow::{Context, bail};
use chrono::{Datelike, Days, Months, NaiveDate, Utc};

use super::questions::Count;
use crate::settings::API_PREFIX;

pub(super) struct Backend {
    pub(super) http: reqwest::Client,
    /// The backend's base URL (the issuer's, for the built-in one).
    pub(super) base: String,
    pub(super) token: String,
}

impl Backend {
    /// How many records of `count.resource` match its filter now.
    pub(super) async fn count(&self, count: &Count) -> anyhow::Result<u64> {
        let listed = !count.resource.starts_with("available-");
        let mut query: Vec<(String, String)> = Vec::new();
        if listed {
            query.push(("limit".into(), "1".into()));
        }
        if let Some(filter) = &count.custom_query {
            query.push(("customQuery".into(), dates(filter)?));
        }
        for (name, value) in &count.params {
            query.push((name.clone(), dates(value)?));
        }
        let path = match count.resource.as_str() {
            "available-dates" | "available-times" => format!("bookings/{}", count.resource),
            other => other.to_owned(),
        };
        let url = format!("{}{API_PREFIX}/{path}", self.base);
        let response = self
            .http
            .get(&url)
            .bearer_auth(&self.token)
            .query(&query)
            .send()
            .await
            .with_context(|| format!("counting {} at {url}", count.resource))?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            bail!("counting {} at {url}: {status}: {body}", count.resource);
        }
        if !listed {
            // The availability endpoints answer the whole list: the dates or times.
            let items: Vec<serde_json::Value> = response
                .json()
                .await
                .with_context(|| format!("{url} sent no list"))?;
            return Ok(items.len() as u64);
        }
        response
            .headers()
            .get("x-total-count")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("{url} sent no x-total-count"))
    }
}

/// Dates of the run's day (UTC, as the backend's days are) for their placeholders:
/// `{today}`, `{today+N}` and `{today-N}` (ISO dates), `{month}` (`2026-11`),
/// `{month-start}` and `{month-end}` (its first and last day).
pub(super) fn dates(text: &str) -> anyhow::Result<String> {
    let today = Utc::now().date_naive();
    let month_start = today.with_day(1).unwrap_or(today);
    let month_end = month_start
        .checked_add_months(Months::new(1))
        .and_then(|next| next.pred_opt())
        .unwrap_or(today);
    let iso = |day: NaiveDate| day.format("%Y-%m-%d").to_string();
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let Some(end) = after.find('}') else {
            out.push('{');
            rest = after;
            continue;
        };
        let name = &after[..end];
        let value = match name {
            "month" => Some(month_start.format("%Y-%m").to_string()),
            "month-start" => Some(iso(month_start)),
            "month-end" => Some(iso(month_end)),
            "today" => Some(iso(today)),
            _ => match name.strip_prefix("today") {
                Some(offset) => Some(iso(shifted(today, offset)
                    .with_context(|| format!("{{{name}}} is no date (write {{today+3}})"))?)),
                None => None,
            },
        };
        match value {
            Some(value) => out.push_str(&value),
            // Not a placeholder (a regular expression's `{2}`, say): kept as it is.
            None => {
                out.push('{');
                out.push_str(name);
                out.push('}');
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn shifted(today: NaiveDate, offset: &str) -> Option<NaiveDate> {
    match offset.split_at_checked(1)? {
        ("+", n) => today.checked_add_days(Days::new(n.parse().ok()?)),
        ("-", n) => today.checked_sub_days(Days::new(n.parse().ok()?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_of_the_run_replace_their_placeholders() {
        let today = Utc::now().date_naive();
        let tomorrow = today.checked_add_days(Days::new(1)).unwrap();
        assert_eq!(
            dates("date >= '{today}' AND date <= '{today+1}'").unwrap(),
            format!("date >= '{today}' AND date <= '{tomorrow}'")
        );
        assert!(dates("{today+x}").is_err());
        assert_eq!(dates("\\d{2}:\\d{2} {").unwrap(), "\\d{2}:\\d{2} {");
        let month = dates("{month} {month-start} {month-end}").unwrap();
        assert!(
            month.starts_with(&today.format("%Y-%m ").to_string()),
            "{month}"
        );
        assert!(
            month.contains(&today.format("%Y-%m-01").to_string()),
            "{month}"
        );
    }
}
