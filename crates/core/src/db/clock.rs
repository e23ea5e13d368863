//! Timestamps as the database stores them: canonical UTC text, fixed width, so that
//! text comparison in SQL (and in customQuery filters) is time comparison.

use chrono::{DateTime, SecondsFormat, Utc};

pub fn canonical(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub fn canonical_now() -> String {
    canonical(Utc::now())
}

pub fn parse_canonical(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|at| at.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn canonical_text_is_fixed_width_utc() {
        let at = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        assert_eq!(canonical(at), "2026-01-02T03:04:05.000Z");
        assert_eq!(parse_canonical(&canonical(at)), Some(at));
    }
}
