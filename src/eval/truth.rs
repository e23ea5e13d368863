//! Truths counted at run time: the backend's `x-total-count` for a list, with the
//! eval's own client token, so a count question is judged against the data as it is
//! when asked, never against a number written down.

use anyhow::{Context, bail};
use chrono::{Days, Utc};

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
        let mut query: Vec<(String, String)> = vec![("limit".into(), "1".into())];
        if let Some(filter) = &count.custom_query {
            query.push(("customQuery".into(), dates(filter)?));
        }
        for (name, value) in &count.params {
            query.push((name.clone(), dates(value)?));
        }
        let url = format!("{}{API_PREFIX}/{}", self.base, count.resource);
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
        response
            .headers()
            .get("x-total-count")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("{url} sent no x-total-count"))
    }
}

/// `{today}` and `{today+N}` (`{today-N}`) as ISO dates of the machine's day.
fn dates(text: &str) -> anyhow::Result<String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("{today") {
        out.push_str(&rest[..start]);
        let after = &rest[start + "{today".len()..];
        let end = after
            .find('}')
            .with_context(|| format!("an unclosed {{today…}} in {text:?}"))?;
        let offset = &after[..end];
        let today = Utc::now().date_naive();
        let day = match offset.split_at_checked(1) {
            None => Some(today),
            Some(("+", n)) => n.parse().ok().and_then(|n| today.checked_add_days(Days::new(n))),
            Some(("-", n)) => n.parse().ok().and_then(|n| today.checked_sub_days(Days::new(n))),
            _ => None,
        }
        .with_context(|| format!("{{today{offset}}} is no date (write {{today+3}})"))?;
        out.push_str(&day.format("%Y-%m-%d").to_string());
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
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
        assert!(dates("{today").is_err());
    }
}
