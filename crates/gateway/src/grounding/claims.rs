//! Finding what an answer states: figures, amounts, dates, times and names, each
//! with its span in the text. What is found here is only read, not judged; whether a
//! tool result states it is `matching`'s.

use super::tokens::{Token, tokens};
use super::values::{self, Clock, Day};
use maitred_protocol::events::ClaimKind;

/// The value a claim states, read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Stated {
    /// A number of things; `noun` is the word after it ("customers").
    Count {
        n: f64,
        noun: String,
    },
    Number(f64),
    Money(f64),
    /// Every reading of the date (`05/11` may be either way round); the first is shown.
    Date(Vec<Day>),
    /// `loose`: written without minutes or a half of the day ("at 7"): either half.
    Time {
        clock: Clock,
        loose: bool,
    },
    /// A name, an id, an email address or a phone number, as written.
    Name(String),
}

/// One claim of the text and where it is, in code points.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Found {
    pub start: usize,
    pub end: usize,
    pub text: String,
    pub stated: Stated,
}

impl Found {
    pub(super) fn kind(&self) -> ClaimKind {
        match self.stated {
            Stated::Count { .. } => ClaimKind::Count,
            Stated::Number(_) => ClaimKind::Number,
            Stated::Money(_) => ClaimKind::Money,
            Stated::Date(_) => ClaimKind::Date,
            Stated::Time { .. } => ClaimKind::Time,
            Stated::Name(_) => ClaimKind::Name,
        }
    }

    /// The value as the wire writes it.
    pub(super) fn value(&self) -> String {
        match &self.stated {
            Stated::Count { n, .. } | Stated::Number(n) => values::written_number(*n),
            Stated::Money(n) => {
                if n.fract() == 0.0 {
                    values::written_number(*n)
                } else {
                    format!("{n:.2}")
                }
            }
            Stated::Date(days) => days.first().map(Day::written).unwrap_or_default(),
            Stated::Time { clock, .. } => clock.written(),
            Stated::Name(name) => name.clone(),
        }
    }
}

/// Words after a number that make it no count of things.
const NOT_NOUNS: &str = "of and or to in on at for from by with than more less fewer over under \
    is are was were be been has have had will would can could should may might do does did \
    the a an this that these those it its their our your my his her times time percent % x \
    out per each apiece so as if but when while then between";

/// Capitalised words that start sentences and label things rather than name anyone.
const NOT_NAMES: &str = "the a an we there here this that these those it i you they he she yes \
    no our your my their its on in at for and or but if as all total note sorry unfortunately \
    however also so please hello hi thanks thank today tomorrow tonight yesterday currently which \
    what when who how then each every some none both one based according summary details \
    is it guest guests booking bookings table tables people party notes note result results \
    found here's there's let's i'm we're you're it's";

/// Capitalised words that label a column or a field rather than go on a name.
const LABELS: &str = "name names email phone date time status id notes total count";

/// Everything `text` states, in order.
pub(crate) fn find(text: &str) -> Vec<Found> {
    let toks = tokens(text);
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let reading = read_at(&toks, i);
        match reading {
            Some((stated, used)) => {
                let (start, end) = (toks[i].start, toks[i + used - 1].end);
                found.push(Found {
                    start,
                    end,
                    text: chars[start..end].iter().collect(),
                    stated,
                });
                i += used;
            }
            None => i += 1,
        }
    }
    found
}

/// The claim that starts at token `i`, and how many tokens it takes.
fn read_at(toks: &[Token], i: usize) -> Option<(Stated, usize)> {
    let t = &toks[i];
    if t.core.is_empty() {
        return None;
    }
    date(toks, i)
        .or_else(|| time(toks, i))
        .or_else(|| money(toks, i))
        .or_else(|| phone(toks, i))
        .or_else(|| identifier(t).map(|s| (s, 1)))
        .or_else(|| number(toks, i))
        .or_else(|| name(toks, i))
}

fn lower(toks: &[Token], i: usize) -> &str {
    toks.get(i).map_or("", |t| t.lower.as_str())
}

/// The token after `i` continues the same clause.
fn joined(toks: &[Token], i: usize) -> bool {
    toks.get(i + 1)
        .is_some_and(|next| !toks[i].ends_clause() && !next.line_start && next.before.is_empty())
}

fn date(toks: &[Token], i: usize) -> Option<(Stated, usize)> {
    let t = &toks[i];
    if let Some(day) = values::iso_date(&t.core) {
        return Some((Stated::Date(vec![day]), 1));
    }
    if t.core.contains('/') {
        let readings = values::slashed_date(&t.core);
        if !readings.is_empty() {
            return Some((Stated::Date(readings), 1));
        }
    }
    // "25 November 2026", "25th of November"
    if let Some(day) = values::day_of_month(&t.lower) {
        let mut m = i + 1;
        if lower(toks, m) == "of" && joined(toks, i) {
            m += 1;
        }
        if let Some(month) = values::month(lower(toks, m))
            && !toks[i].ends_clause()
        {
            let year = joined(toks, m)
                .then(|| values::year(lower(toks, m + 1)))
                .flatten();
            let day = Day::new(year, month, day)?;
            return Some((
                Stated::Date(vec![day]),
                m + 1 - i + usize::from(year.is_some()),
            ));
        }
    }
    // "November 25", "Nov 25th, 2026"
    if let Some(month) = values::month(&t.lower)
        && (t.lower != "may" || t.core.starts_with('M'))
        && joined(toks, i)
        && let Some(day) = values::day_of_month(lower(toks, i + 1))
    {
        let year = toks
            .get(i + 2)
            .filter(|next| !next.line_start && !toks[i + 1].after.contains(['.', ';']))
            .and_then(|next| values::year(&next.lower));
        let day = Day::new(year, month, day)?;
        return Some((Stated::Date(vec![day]), 2 + usize::from(year.is_some())));
    }
    None
}

fn time(toks: &[Token], i: usize) -> Option<(Stated, usize)> {
    let t = &toks[i];
    if let Some((hour, minute, rest)) = values::clock_digits(&t.lower) {
        let half = if rest.is_empty() && joined(toks, i) {
            values::meridiem(lower(toks, i + 1)).map(|h| (h, 2))
        } else {
            values::meridiem(rest).map(|h| (h, 1))
        };
        let (hour, used) = match half {
            Some((afternoon, used)) => (values::with_meridiem(hour, afternoon)?, used),
            None if rest.is_empty() => (hour, 1),
            None => return None,
        };
        let clock = Clock::new(hour, minute)?;
        return Some((
            Stated::Time {
                clock,
                loose: false,
            },
            used,
        ));
    }
    if let Some(clock) = values::clock_word(&t.lower) {
        return Some((
            Stated::Time {
                clock,
                loose: false,
            },
            1,
        ));
    }
    // "7 pm"
    if let Ok(hour) = t.lower.parse::<u32>()
        && joined(toks, i)
        && let Some(afternoon) = values::meridiem(lower(toks, i + 1))
    {
        let clock = Clock::new(values::with_meridiem(hour, afternoon)?, 0)?;
        return Some((
            Stated::Time {
                clock,
                loose: false,
            },
            2,
        ));
    }
    // "at 7", "at 8.30": a time of day either half.
    if i > 0
        && toks[i - 1].lower == "at"
        && !toks[i - 1].ends_clause()
        && let Some((hour, minute)) = loose_clock(&t.lower)
    {
        let clock = Clock::new(hour, minute)?;
        return Some((Stated::Time { clock, loose: true }, 1));
    }
    None
}

fn loose_clock(word: &str) -> Option<(u32, u32)> {
    let (hour, minute) = match word.split_once('.') {
        Some((h, m)) if m.len() == 2 => (h.parse().ok()?, m.parse().ok()?),
        Some(_) => return None,
        None => (word.parse().ok()?, 0),
    };
    (1..=12).contains(&hour).then_some((hour, minute))
}

fn money(toks: &[Token], i: usize) -> Option<(Stated, usize)> {
    let t = &toks[i];
    let mut chars = t.core.chars();
    let first = chars.next()?;
    // "$1,200.50", "€12"
    if values::currency_sign(first) {
        return values::digits(chars.as_str()).map(|n| (Stated::Money(n), 1));
    }
    // "12€"
    if let Some(last) = t.core.chars().last()
        && values::currency_sign(last)
    {
        let amount = &t.core[..t.core.len() - last.len_utf8()];
        return values::digits(amount).map(|n| (Stated::Money(n), 1));
    }
    // "EUR 12"
    if values::currency_word(&t.lower)
        && t.lower.len() == 3
        && joined(toks, i)
        && let Some(n) = values::digits(&toks[i + 1].core)
    {
        return Some((Stated::Money(n), 2));
    }
    // "12 euros"
    if let Some(n) = values::digits(&t.core)
        && joined(toks, i)
        && values::currency_word(lower(toks, i + 1))
    {
        return Some((Stated::Money(n), 2));
    }
    None
}

/// "+44 20 7946 0958", "555-0123": seven digits or more in groups.
fn phone(toks: &[Token], i: usize) -> Option<(Stated, usize)> {
    let grouped = |t: &Token| {
        !t.core.is_empty()
            && t.core
                .chars()
                .all(|c| c.is_ascii_digit() || "+-()".contains(c))
            && t.core.chars().any(|c| c.is_ascii_digit())
    };
    let t = &toks[i];
    if !grouped(t) {
        return None;
    }
    let mut used = 1;
    while i + used < toks.len() && grouped(&toks[i + used]) && joined(toks, i + used - 1) {
        used += 1;
    }
    let written: Vec<&str> = toks[i..i + used].iter().map(|t| t.core.as_str()).collect();
    let digits = written
        .concat()
        .chars()
        .filter(char::is_ascii_digit)
        .count();
    let phone_like = t.core.starts_with('+')
        || used > 2
        || written.iter().any(|w| w.contains('-') && w.len() > 4);
    (digits >= 7 && phone_like).then(|| (Stated::Name(written.join(" ")), used))
}

/// `bk_1`, `customer-123`, `T12`, an email address: a thing's own name.
fn identifier(t: &Token) -> Option<Stated> {
    let core = &t.core;
    if core.contains('@') && core.contains('.') && !core.starts_with('@') {
        return Some(Stated::Name(core.to_lowercase()));
    }
    let letters = core.chars().any(|c| c.is_alphabetic());
    let digits = core.chars().any(|c| c.is_ascii_digit());
    let plain = core
        .chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '-');
    let ordinal = values::day_of_month(&t.lower).is_some()
        || ["st", "nd", "rd", "th"].iter().any(|e| {
            t.lower
                .strip_suffix(e)
                .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
        });
    (letters && digits && plain && !ordinal && !core.starts_with('-'))
        .then(|| Stated::Name(core.clone()))
}

fn number(toks: &[Token], i: usize) -> Option<(Stated, usize)> {
    let t = &toks[i];
    // A list's "1." or "2)" at the start of a line numbers the list.
    if t.line_start && (t.after.starts_with('.') || t.after.starts_with(')')) && t.before.is_empty()
    {
        return None;
    }
    let (n, used, percent) = if let Some(digits) = t.core.strip_suffix('%') {
        (values::digits(digits)?, 1, true)
    } else if let Some(n) = values::digits(&t.core) {
        (n, 1, false)
    } else {
        let (n, used) = number_words(toks, i)?;
        (f64::from(n), used, false)
    };
    let last = i + used - 1;
    if percent || lower(toks, last + 1) == "percent" {
        return Some((Stated::Number(n), used));
    }
    let noun = lower(toks, last + 1);
    let counts = joined(toks, last)
        && !noun.is_empty()
        && noun.chars().all(|c| c.is_alphabetic() || c == '-')
        && !NOT_NOUNS.split_whitespace().any(|w| w == noun);
    if counts {
        Some((
            Stated::Count {
                n,
                noun: noun.to_owned(),
            },
            used,
        ))
    } else {
        Some((Stated::Number(n), used))
    }
}

/// "forty", "sixty-two", "twenty one", "two hundred and five": not a lone "one",
/// which is more often a word than a figure.
fn number_words(toks: &[Token], i: usize) -> Option<(u32, usize)> {
    let first = values::number_word(&toks[i].lower)?;
    let mut n = first;
    let mut used = 1;
    if values::tens_word(&toks[i].lower).is_some()
        && joined(toks, i)
        && let Some(unit) = values::unit_word(lower(toks, i + 1)).filter(|u| (1..10).contains(u))
    {
        n += unit;
        used += 1;
    }
    let scale = |word: &str| match word {
        "hundred" => Some(100),
        "thousand" => Some(1000),
        _ => None,
    };
    if joined(toks, i + used - 1)
        && let Some(scale) = scale(lower(toks, i + used))
    {
        n *= scale;
        used += 1;
        let mut rest = i + used;
        if lower(toks, rest) == "and" && joined(toks, rest - 1) {
            rest += 1;
        }
        if joined(toks, rest - 1)
            && let Some(more) = values::number_word(lower(toks, rest))
        {
            n += more;
            used = rest + 1 - i;
        }
    }
    (used > 1 || first != 1).then_some((n, used))
}

/// A word shaped like part of a name, and no weekday, month or label.
fn capitalised(t: &Token) -> bool {
    let mut chars = t.core.chars();
    chars.next().is_some_and(char::is_uppercase)
        && t.core
            .chars()
            .all(|c| c.is_alphabetic() || c == '\'' || c == '-' || c == '.')
        && !values::WEEKDAYS.contains(&t.lower.as_str())
        && values::month(&t.lower).is_none()
        && !LABELS.split_whitespace().any(|w| w == t.lower)
}

/// A word a name can start with: not one that starts sentences ("The", "We").
fn name_start(t: &Token) -> bool {
    capitalised(t) && !NOT_NAMES.split_whitespace().any(|w| w == t.lower)
}

/// Two or more capitalised words in a row ("Ada Lovelace", "Customer A"), not in a
/// heading.
fn name(toks: &[Token], i: usize) -> Option<(Stated, usize)> {
    if !name_start(&toks[i]) || heading(toks, i) {
        return None;
    }
    let mut used = 1;
    while joined(toks, i + used - 1) && toks.get(i + used).is_some_and(capitalised) {
        used += 1;
    }
    (used >= 2).then(|| {
        let words: Vec<&str> = toks[i..i + used].iter().map(|t| t.core.as_str()).collect();
        (Stated::Name(words.join(" ")), used)
    })
}

/// The token is on a markdown heading's line.
fn heading(toks: &[Token], i: usize) -> bool {
    toks[..=i]
        .iter()
        .rev()
        .find(|t| t.line_start)
        .is_some_and(|t| t.piece.starts_with('#'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(text: &str) -> Vec<(ClaimKind, String, String)> {
        find(text)
            .into_iter()
            .map(|f| (f.kind(), f.value(), f.text))
            .collect()
    }

    fn one(kind: ClaimKind, value: &str, text: &str) -> (ClaimKind, String, String) {
        (kind, value.to_owned(), text.to_owned())
    }

    #[test]
    fn counts_and_numbers() {
        assert_eq!(
            values("We have 40 customers, and 7 of them booked."),
            vec![
                one(ClaimKind::Count, "40", "40"),
                one(ClaimKind::Number, "7", "7"),
            ]
        );
        assert_eq!(
            values("Forty customers; sixty-two bookings; 1,200 covers"),
            vec![
                one(ClaimKind::Count, "40", "Forty"),
                one(ClaimKind::Count, "62", "sixty-two"),
                one(ClaimKind::Count, "1200", "1,200"),
            ]
        );
        assert_eq!(values("one of them"), vec![]);
        assert_eq!(
            values("two hundred and five guests"),
            vec![one(ClaimKind::Count, "205", "two hundred and five")]
        );
        assert_eq!(
            values("up 15% this week")[0],
            one(ClaimKind::Number, "15", "15%")
        );
    }

    #[test]
    fn list_markers_are_not_figures() {
        assert_eq!(
            values("1. Ada Lovelace\n2) Bob Stone"),
            vec![
                one(ClaimKind::Name, "Ada Lovelace", "Ada Lovelace"),
                one(ClaimKind::Name, "Bob Stone", "Bob Stone"),
            ]
        );
    }

    #[test]
    fn money_in_its_spellings() {
        assert_eq!(
            values("It costs $1,200.50, €12 or 30 euros (EUR 45)."),
            vec![
                one(ClaimKind::Money, "1200.50", "$1,200.50"),
                one(ClaimKind::Money, "12", "€12"),
                one(ClaimKind::Money, "30", "30 euros"),
                one(ClaimKind::Money, "45", "EUR 45"),
            ]
        );
    }

    #[test]
    fn dates_and_times_written_differently() {
        assert_eq!(
            values("On 25 November 2026 at 7pm, or November 26th at 19:30, or 27/11 at 8"),
            vec![
                one(ClaimKind::Date, "2026-11-25", "25 November 2026"),
                one(ClaimKind::Time, "19:00", "7pm"),
                one(ClaimKind::Date, "--11-26", "November 26th"),
                one(ClaimKind::Time, "19:30", "19:30"),
                one(ClaimKind::Date, "--11-27", "27/11"),
                one(ClaimKind::Time, "08:00", "8"),
            ]
        );
        assert_eq!(
            values("Friday, 2026-11-28, 7:30 pm")[..],
            [
                one(ClaimKind::Date, "2026-11-28", "2026-11-28"),
                one(ClaimKind::Time, "19:30", "7:30 pm"),
            ]
        );
    }

    #[test]
    fn names_ids_emails_and_phones() {
        assert_eq!(
            values(
                "The Best Pizza Ever, said Customer A (customer-123, ada@example.com, +44 20 7946 0958)."
            ),
            vec![
                one(ClaimKind::Name, "Best Pizza Ever", "Best Pizza Ever"),
                one(ClaimKind::Name, "Customer A", "Customer A"),
                one(ClaimKind::Name, "customer-123", "customer-123"),
                one(ClaimKind::Name, "ada@example.com", "ada@example.com"),
                one(ClaimKind::Name, "+44 20 7946 0958", "+44 20 7946 0958"),
            ]
        );
        assert_eq!(values("# Bookings Today\nThere are none."), vec![]);
        assert_eq!(values("Here Is It"), vec![]);
    }

    #[test]
    fn spans_count_code_points() {
        let found = find("Café : 60 clients");
        assert_eq!((found[0].start, found[0].end), (7, 9));
    }
}
