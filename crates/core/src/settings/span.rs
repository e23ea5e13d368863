//! Durations as people write them: `90s`, `5m`, `250ms` (humantime), or a bare
//! number of seconds, which is what every duration setting took before and what the
//! `_secs` keys of the config files still say.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// A duration on the command line or in the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span(pub Duration);

/// Text that is not a duration, with what was expected.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotADuration(String);

impl FromStr for Span {
    type Err = NotADuration;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse(text).map(Span)
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl From<Span> for Duration {
    fn from(span: Span) -> Self {
        span.0
    }
}

pub fn parse(text: &str) -> Result<Duration, NotADuration> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).map_err(|_| {
            NotADuration(format!(
                "{text:?} is not a duration: seconds must be 0 or more"
            ))
        });
    }
    humantime::parse_duration(text).map_err(|error| {
        NotADuration(format!(
            "{text:?} is not a duration like 30s, 5m or 250ms: {error}"
        ))
    })
}

/// Serde: a number of seconds or a humantime string.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Seconds(f64),
        Text(String),
    }
    match Raw::deserialize(deserializer)? {
        Raw::Seconds(seconds) => Duration::try_from_secs_f64(seconds)
            .map_err(|_| serde::de::Error::custom("a duration must be 0 seconds or more")),
        Raw::Text(text) => parse(&text).map_err(serde::de::Error::custom),
    }
}

/// Serde: an optional [`deserialize`]d duration (with `#[serde(default)]`).
pub fn optional_seconds<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    deserialize(deserializer).map(Some)
}

/// Serde: a number of milliseconds or a humantime string.
pub fn millis<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Millis(u64),
        Text(String),
    }
    match Raw::deserialize(deserializer)? {
        Raw::Millis(millis) => Ok(Duration::from_millis(millis)),
        Raw::Text(text) => parse(&text).map_err(serde::de::Error::custom),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_humantime_both_read() {
        assert_eq!(parse("300").unwrap(), Duration::from_secs(300));
        assert_eq!(parse("0.25").unwrap(), Duration::from_millis(250));
        assert_eq!(parse("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse("1m 30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse("-1").is_err());
        assert!(parse("soon").unwrap_err().to_string().contains("30s"));
        assert_eq!(Span(Duration::from_secs(90)).to_string(), "1m 30s");
    }

    #[test]
    fn files_take_numbers_and_strings() {
        #[derive(Deserialize)]
        struct File {
            #[serde(deserialize_with = "deserialize")]
            wait: Duration,
        }
        let numeric: File = toml::from_str("wait = 2.5").unwrap();
        assert_eq!(numeric.wait, Duration::from_millis(2500));
        let text: File = toml::from_str("wait = \"2m\"").unwrap();
        assert_eq!(text.wait, Duration::from_secs(120));
        assert!(toml::from_str::<File>("wait = \"later\"").is_err());
    }
}
