//! The values a question states, read with small hand parsers: dates ("tomorrow",
//! "on friday", "21 november", "25/11"), times ("7pm", "19:00", "at 8"), a party size,
//! a duration, ids, emails, phone numbers, a person's name, quoted text, and whether
//! the question counts or asks for an action.

use chrono::{Datelike, Days, NaiveDate};

use super::comparisons::{self, Comparison, Ordering};
use super::words::{self, WEEKDAYS, listed, month_number, split_words, stem};

const NUMBER_WORDS: &str = "zero one two three four five six seven eight nine ten eleven \
    twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty";
const PARTY_WORDS: &str = "people persons person guests guest pax diners adults covers";
const PARTY_NOUNS: &str = "party group table";
/// Words after a number that make it anything but a head count.
const UNIT_WORDS: &str = "am pm a.m p.m h hr hrs hour hours min mins minute minutes day days \
    night nights week weeks month months year years o'clock oclock percent % times euro euros \
    dollars";
const TIME_CUES: &str = "at around about from until till after before by";
const MORNING_WORDS: &str = "morning breakfast am a.m";
const NAME_CUES: &str = "for named called name guest under";
const TOP_BEFORE: &str = "top first last latest newest oldest recent";
const TOP_AFTER: &str = "latest newest oldest most recent last first";
/// Words that open a question rather than a request: "how do I cancel" asks, it does
/// not cancel.
const QUESTION_OPENERS: &str = "how what which when where why who whose whom is are was were \
    did does has have had";
/// Words after which a verb is still a request: "please cancel", "I want to book".
const REQUEST_LEADS: &str = "please pls kindly to you we i lets let's and then just";
const COUNT_BREAKS: &str = "do does did are is were was have has had we you they there i in on \
    at for with from by and or to will can could would should currently right still today \
    tomorrow tonight this that per since between";
const DETERMINERS: &str = "of the our my your all these those any";

/// One whitespace-separated piece of the question, without surrounding punctuation.
#[derive(Debug, Clone)]
pub(super) struct Token {
    pub raw: String,
    pub lower: String,
    /// A comma, full stop, colon or the like followed it: a clause ends here.
    pub ends_clause: bool,
}

pub(super) fn tokens(text: &str) -> Vec<Token> {
    text.split_whitespace()
        .filter_map(|piece| {
            let trimmed_end = piece.trim_end_matches(|c: char| ",.!?;:)]}\"'”’…".contains(c));
            let raw = trimmed_end.trim_start_matches(|c: char| "([{\"'“‘".contains(c));
            (!raw.is_empty()).then(|| Token {
                raw: raw.to_owned(),
                lower: raw.to_lowercase(),
                ends_clause: trimmed_end.len() < piece.len()
                    && piece[trimmed_end.len()..].contains([',', '.', '!', '?', ';', ':']),
            })
        })
        .collect()
}

/// Text after a colon that ends a word, with the word before it: `note: window seat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Labelled {
    pub label: String,
    pub text: String,
}

#[derive(Debug, Clone)]
pub(super) struct Facts {
    pub dates: Vec<NaiveDate>,
    /// The dates that are not the bound of a comparison: "on friday", not "after friday".
    pub free_dates: Vec<NaiveDate>,
    /// `HH:MM`, 24-hour.
    pub times: Vec<String>,
    pub party: Option<u32>,
    pub minutes: Option<u32>,
    /// "top 5", "the 3 latest": how many records were asked for.
    pub top: Option<u32>,
    pub ids: Vec<String>,
    pub emails: Vec<String>,
    pub phones: Vec<String>,
    pub person: Option<String>,
    pub quoted: Option<String>,
    pub labelled: Option<Labelled>,
    /// "how many", "number of", "count".
    pub counting: bool,
    /// What is being counted, as the question words it ("customers", "free tables").
    pub counted: Vec<String>,
    /// Action verbs used as requests ("book", "cancel"), as written.
    pub actions: Vec<String>,
    /// The stems of every word, stop words included, for matching enum values.
    pub stems: Vec<String>,
    /// The meaningful words as written, for a free-text search argument.
    pub keywords: Vec<String>,
    /// The words joined by single spaces and padded, for matching phrases.
    pub phrase: String,
    /// "more than 3 bookings", "after friday".
    pub comparisons: Vec<Comparison>,
    /// "the most bookings", "the latest".
    pub ordering: Option<Ordering>,
    /// The question asks about one record: "which customer has…", "who spent…".
    pub singular: bool,
    /// The weekdays named (0 is Monday), and whether in the plural ("on saturdays").
    pub weekdays: Vec<(usize, bool)>,
    /// Whole months named, `YYYY-MM`: "2026-11", "november" (the latest one not
    /// in the future), "november 2025".
    pub months: Vec<String>,
}

impl Facts {
    pub(super) fn read(question: &str, today: NaiveDate) -> Facts {
        let toks = tokens(question);
        // A note's own words ("guest is allergic…") choose no option and set no flag.
        let words = split_words(&without_free_text(question));
        let comparisons: Vec<Comparison> = quoted(question)
            .and_then(|text| comparisons::quoted(question, &text))
            .into_iter()
            .chain(comparisons::read(&toks, today))
            .collect();
        Facts {
            dates: dates(&toks, today),
            free_dates: free_dates(&toks, today, &comparisons),
            times: times(&toks),
            party: party(&toks),
            minutes: minutes(&toks),
            top: top(&toks),
            ids: ids(&toks),
            emails: toks.iter().filter_map(|t| email(&t.lower)).collect(),
            phones: phones(&toks),
            person: person(&toks),
            quoted: quoted(question),
            labelled: labelled(question),
            counting: counting(&toks),
            counted: counted(&toks),
            actions: actions(&toks),
            stems: words.iter().map(|w| stem(w)).collect(),
            keywords: words
                .iter()
                .filter(|w| w.len() > 1 && !words::is_stop_word(w))
                .cloned()
                .collect(),
            phrase: format!(" {} ", words.join(" ")),
            comparisons,
            ordering: comparisons::ordering(&toks),
            singular: singular(&toks),
            weekdays: weekdays(&toks),
            months: months(&toks, today),
        }
    }

    /// The question gives at least one value an argument could take.
    pub(super) fn states_values(&self) -> bool {
        !self.dates.is_empty()
            || !self.times.is_empty()
            || self.party.is_some()
            || self.minutes.is_some()
            || !self.ids.is_empty()
            || !self.emails.is_empty()
            || !self.phones.is_empty()
            || self.person.is_some()
            || self.quoted.is_some()
            || self.labelled.is_some()
    }

    /// These facts with the values a follow-up message gives put first: the request
    /// stays this one's, the details come from the follow-up where it has them.
    pub(super) fn completed_by(self, later: &Facts) -> Facts {
        fn pick<T: Clone>(later: &[T], earlier: Vec<T>) -> Vec<T> {
            if later.is_empty() {
                earlier
            } else {
                later.to_vec()
            }
        }
        Facts {
            dates: pick(&later.dates, self.dates),
            free_dates: pick(&later.free_dates, self.free_dates),
            times: pick(&later.times, self.times),
            months: pick(&later.months, self.months),
            party: later.party.or(self.party),
            minutes: later.minutes.or(self.minutes),
            top: later.top.or(self.top),
            ids: pick(&later.ids, self.ids),
            emails: pick(&later.emails, self.emails),
            phones: pick(&later.phones, self.phones),
            person: later.person.clone().or(self.person),
            quoted: later.quoted.clone().or(self.quoted),
            labelled: later.labelled.clone().or(self.labelled),
            comparisons: pick(&later.comparisons, self.comparisons),
            ordering: later.ordering.clone().or(self.ordering),
            stems: [self.stems, later.stems.clone()].concat(),
            phrase: format!("{}{}", self.phrase, later.phrase),
            ..self
        }
    }
}

/// The months a question names as a whole: `YYYY-MM`, or a month's name with or
/// without its year (a name alone is the latest such month that has begun: a report
/// is of the past). A name next to a day ("november 21", "21 november") is a date.
fn months(toks: &[Token], today: NaiveDate) -> Vec<String> {
    let mut found = Vec::new();
    for (i, tok) in toks.iter().enumerate() {
        let word = tok.lower.as_str();
        if let Some((year, month)) = word.split_once('-')
            && year.len() == 4
            && month.len() == 2
            && year
                .bytes()
                .chain(month.bytes())
                .all(|b| b.is_ascii_digit())
            && (1..=12).contains(&month.parse::<u32>().unwrap_or(0))
        {
            found.push(word.to_owned());
            continue;
        }
        let Some(month) = month_number(word) else {
            continue;
        };
        // "may" is also a verb: only a month next to a year, or after "in"/"of"/"for".
        let next = toks.get(i + 1).map(|t| t.lower.as_str());
        let year = next
            .filter(|n| n.len() == 4)
            .and_then(|n| n.parse::<i32>().ok());
        let before = i.checked_sub(1).map(|b| toks[b].lower.as_str());
        let is_day = |w: &str| {
            let digits = w.trim_end_matches(|c: char| c.is_ascii_alphabetic());
            !digits.is_empty() && digits.len() <= 2 && digits.parse::<u32>().is_ok()
        };
        let day_follows = next.is_some_and(is_day) || before.is_some_and(is_day);
        let introduced = matches!(
            before,
            Some("in" | "of" | "for" | "during" | "last" | "this")
        );
        if day_follows || (word == "may" && year.is_none() && !introduced) {
            continue;
        }
        let year = year.unwrap_or(if month <= today.month() {
            today.year()
        } else {
            today.year() - 1
        });
        found.push(format!("{year:04}-{month:02}"));
    }
    found
}

// ---------------------------------------------------------------------------------
// Numbers

pub(super) fn number(word: &str) -> Option<u32> {
    if !word.is_empty() && word.len() <= 4 && word.bytes().all(|b| b.is_ascii_digit()) {
        return word.parse().ok();
    }
    NUMBER_WORDS
        .split_whitespace()
        .position(|w| w == word)
        .and_then(|n| u32::try_from(n).ok())
}

pub(super) fn word_at(toks: &[Token], i: Option<usize>) -> &str {
    i.and_then(|i| toks.get(i)).map_or("", |t| t.lower.as_str())
}

// ---------------------------------------------------------------------------------
// Dates

fn dates(toks: &[Token], today: NaiveDate) -> Vec<NaiveDate> {
    free_dates(toks, today, &[])
}

/// The days a token names: one, or the first and last of "this week", "next week",
/// "this weekend".
fn days_at(toks: &[Token], i: usize, today: NaiveDate) -> Vec<NaiveDate> {
    if let Some(date) = date_at(toks, i, today) {
        return vec![date];
    }
    let weekday = u64::from(today.weekday().num_days_from_monday());
    let (first, last) = match (word_at(toks, i.checked_sub(1)), toks[i].lower.as_str()) {
        ("this", "week") => (0, 6 - weekday),
        ("next", "week") => (7 - weekday, 13 - weekday),
        ("this" | "the", "weekend") => (5_u64.saturating_sub(weekday), 6 - weekday),
        ("next", "weekend") => (12 - weekday, 13 - weekday),
        _ => return Vec::new(),
    };
    [first, last]
        .iter()
        .filter_map(|ahead| today.checked_add_days(Days::new(*ahead)))
        .collect()
}

/// The question without the text after a labelling colon, and without quoted text
/// longer than a value (`'seated'` may name a status; `"guest is vegan"` is a note).
fn without_free_text(question: &str) -> String {
    let mut text = question.to_owned();
    if let Some(quoted) = quoted(question).filter(|q| q.split_whitespace().count() > 2) {
        text = text.replace(&quoted, " ");
    }
    if let Some(labelled) = labelled(&text) {
        text = text.replace(&labelled.text, " ");
    }
    text
}

fn free_dates(toks: &[Token], today: NaiveDate, comparisons: &[Comparison]) -> Vec<NaiveDate> {
    let mut found = Vec::new();
    for i in 0..toks.len() {
        let compared = comparisons
            .iter()
            .any(|c| (c.span.0..c.span.1).contains(&i));
        if compared {
            continue;
        }
        for date in days_at(toks, i, today) {
            if !found.contains(&date) {
                found.push(date);
            }
        }
    }
    found
}

pub(super) fn date_at(toks: &[Token], i: usize, today: NaiveDate) -> Option<NaiveDate> {
    let word = toks[i].lower.as_str();
    let prev = |k: usize| word_at(toks, i.checked_sub(k));
    let next = |k: usize| word_at(toks, Some(i + k));
    match word {
        "today" | "tonight" => return Some(today),
        "tomorrow" => {
            let days = if prev(1) == "after" && prev(2) == "day" {
                2
            } else {
                1
            };
            return today.checked_add_days(Days::new(days));
        }
        "yesterday" => return today.pred_opt(),
        "in" if matches!(next(2), "day" | "days") => {
            return number(next(1)).and_then(|n| today.checked_add_days(Days::new(n.into())));
        }
        _ => {}
    }
    if let Some(day) = WEEKDAYS.iter().position(|w| *w == word) {
        return upcoming_weekday(today, day, prev(1) == "next");
    }
    if let Some(date) = iso_date(word).or_else(|| slashed_date(word, today)) {
        return Some(date);
    }
    if let Some(day) = day_number(word) {
        let month_at = if next(1) == "of" { 2 } else { 1 };
        if let Some(month) = month_number(next(month_at)) {
            return calendar_date(today, month, day, year(next(month_at + 1)));
        }
    }
    let month = month_number(word)?;
    let day = day_number(next(1))?;
    calendar_date(today, month, day, year(next(2)))
}

/// The next such weekday: today counts, unless the question says "next".
fn upcoming_weekday(today: NaiveDate, day: usize, strictly_after: bool) -> Option<NaiveDate> {
    let now = today.weekday().num_days_from_monday() as usize;
    let mut ahead = (day + 7 - now) % 7;
    if ahead == 0 && strictly_after {
        ahead = 7;
    }
    today.checked_add_days(Days::new(ahead as u64))
}

fn iso_date(word: &str) -> Option<NaiveDate> {
    let head = word.get(..10)?;
    let rest = &word[10..];
    if !(rest.is_empty() || rest.starts_with('t')) {
        return None;
    }
    NaiveDate::parse_from_str(head, "%Y-%m-%d").ok()
}

/// `25/11`, `25/11/2026`: day first, unless only the other reading is a date.
fn slashed_date(word: &str, today: NaiveDate) -> Option<NaiveDate> {
    let parts: Vec<&str> = word.split('/').collect();
    if !(2..=3).contains(&parts.len()) {
        return None;
    }
    let a: u32 = parts[0].parse().ok()?;
    let b: u32 = parts[1].parse().ok()?;
    let (day, month) = if b > 12 && a <= 12 { (b, a) } else { (a, b) };
    let year = match parts.get(2) {
        Some(y) => Some(expand_year(y.parse().ok()?)),
        None => None,
    };
    calendar_date(today, month, day, year)
}

fn expand_year(year: i32) -> i32 {
    if year < 100 { 2000 + year } else { year }
}

fn day_number(word: &str) -> Option<u32> {
    let digits = ["st", "nd", "rd", "th"]
        .iter()
        .find_map(|suffix| word.strip_suffix(suffix))
        .unwrap_or(word);
    if digits.is_empty() || digits.len() > 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|d| (1..=31).contains(d))
}

fn year(word: &str) -> Option<i32> {
    (word.len() == 4)
        .then(|| word.parse().ok())
        .flatten()
        .filter(|y| (1900..=2200).contains(y))
}

/// A date without a year is the next one to come.
fn calendar_date(today: NaiveDate, month: u32, day: u32, year: Option<i32>) -> Option<NaiveDate> {
    if let Some(year) = year {
        return NaiveDate::from_ymd_opt(year, month, day);
    }
    match NaiveDate::from_ymd_opt(today.year(), month, day) {
        Some(date) if date >= today => Some(date),
        _ => NaiveDate::from_ymd_opt(today.year() + 1, month, day),
    }
}

// ---------------------------------------------------------------------------------
// Times

struct Clock {
    hour: u32,
    minute: u32,
    /// `Some(true)` for pm, `Some(false)` for am.
    pm: Option<bool>,
    /// A plain number: only a time after "at", "around" and the like.
    bare: bool,
}

fn times(toks: &[Token]) -> Vec<String> {
    let morning = toks.iter().any(|t| listed(MORNING_WORDS, t.lower.as_str()));
    let mut found = Vec::new();
    for i in 0..toks.len() {
        if let Some(time) = time_at(toks, i, morning)
            && !found.contains(&time)
        {
            found.push(time);
        }
    }
    found
}

pub(super) fn time_at(toks: &[Token], i: usize, morning: bool) -> Option<String> {
    let word = toks[i].lower.as_str();
    match word {
        "noon" | "midday" => return Some("12:00".to_owned()),
        "midnight" => return Some("00:00".to_owned()),
        _ => {}
    }
    let mut clock = clock(word)?;
    let next = word_at(toks, Some(i + 1));
    if clock.pm.is_none() {
        clock.pm = match next {
            "pm" | "p.m" => Some(true),
            "am" | "a.m" => Some(false),
            _ => None,
        };
        clock.bare &= clock.pm.is_none();
    }
    if clock.bare {
        let cued = listed(TIME_CUES, word_at(toks, i.checked_sub(1)));
        if !cued || listed(UNIT_WORDS, next) || listed(PARTY_WORDS, next) {
            return None;
        }
        if month_number(next).is_some() {
            return None;
        }
        if (1..12).contains(&clock.hour) && !morning {
            clock.pm = Some(true);
        }
    }
    let hour = match clock.pm {
        Some(true) if clock.hour < 12 => clock.hour + 12,
        Some(false) if clock.hour == 12 => 0,
        _ => clock.hour,
    };
    Some(format!("{hour:02}:{:02}", clock.minute))
}

/// `19:00`, `7:30pm`, `7pm`, `7.30pm`, `8`.
fn clock(word: &str) -> Option<Clock> {
    let (body, pm) = if let Some(b) = word.strip_suffix("pm").or(word.strip_suffix("p.m")) {
        (b, Some(true))
    } else if let Some(b) = word.strip_suffix("am").or(word.strip_suffix("a.m")) {
        (b, Some(false))
    } else {
        (word, None)
    };
    let separator = if pm.is_some() {
        &[':', '.'][..]
    } else {
        &[':'][..]
    };
    let (hour, minute, bare) = match body.split_once(separator) {
        Some((h, m)) if m.len() == 2 => (h, m, false),
        Some(_) => return None,
        None => (body, "0", pm.is_none()),
    };
    if hour.is_empty() || hour.len() > 2 || !hour.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let hour: u32 = hour.parse().ok()?;
    let minute: u32 = minute.parse().ok()?;
    let limit = if pm.is_some() { 12 } else { 23 };
    (hour <= limit && minute < 60).then_some(Clock {
        hour,
        minute,
        pm,
        bare,
    })
}

// ---------------------------------------------------------------------------------
// Head counts, durations, page sizes

/// "4 people", "party of 4" first; a plain "for 4" only when nothing says more.
fn party(toks: &[Token]) -> Option<u32> {
    let explicit = (0..toks.len()).find_map(|i| {
        let n = number(&toks[i].lower)?;
        let next = word_at(toks, Some(i + 1));
        let of_us = next == "of" && word_at(toks, Some(i + 2)) == "us";
        let party_of = word_at(toks, i.checked_sub(1)) == "of"
            && listed(PARTY_NOUNS, word_at(toks, i.checked_sub(2)));
        (listed(PARTY_WORDS, next) || of_us || party_of).then_some(n)
    });
    explicit.or_else(|| {
        (1..toks.len()).find_map(|i| {
            let n = number(&toks[i].lower)?;
            let next = word_at(toks, Some(i + 1));
            let plain = toks[i - 1].lower == "for"
                && !listed(UNIT_WORDS, next)
                && month_number(next).is_none();
            plain.then_some(n).filter(|n| *n > 0)
        })
    })
}

fn minutes(toks: &[Token]) -> Option<u32> {
    (0..toks.len()).find_map(|i| {
        let word = toks[i].lower.as_str();
        let next = word_at(toks, Some(i + 1));
        if let Some(n) = word.strip_suffix("min").and_then(number) {
            return Some(n);
        }
        let amount: f64 = match word {
            "an" | "a" => 1.0,
            "half" if next == "an" => return Some(30),
            _ => word
                .parse()
                .ok()
                .filter(|n: &f64| *n > 0.0 && *n < 1000.0)?,
        };
        let scale = match next {
            "minute" | "minutes" | "min" | "mins" => 1.0,
            "hour" | "hours" | "h" | "hr" | "hrs" => 60.0,
            _ => return None,
        };
        Some((amount * scale).round() as u32)
    })
}

fn top(toks: &[Token]) -> Option<u32> {
    (0..toks.len()).find_map(|i| {
        let word = toks[i].lower.as_str();
        if word.is_empty() || !word.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n = number(word)?;
        let before = listed(TOP_BEFORE, word_at(toks, i.checked_sub(1)));
        let after = listed(TOP_AFTER, word_at(toks, Some(i + 1)));
        (before || after).then_some(n).filter(|n| *n > 0)
    })
}

// ---------------------------------------------------------------------------------
// Ids, emails, phone numbers

fn ids(toks: &[Token]) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for (i, tok) in toks.iter().enumerate() {
        let after_id_word = matches!(word_at(toks, i.checked_sub(1)), "id" | "#" | "ref");
        if let Some(id) = id_token(&tok.raw, after_id_word)
            && !found.contains(&id)
        {
            found.push(id);
        }
    }
    found
}

/// `#42`, a hex string of 12 or more characters, a UUID, or anything after "id".
fn id_token(raw: &str, after_id_word: bool) -> Option<String> {
    let idish = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    if let Some(rest) = raw.strip_prefix('#') {
        return idish(rest).then(|| rest.to_owned());
    }
    let hex: String = raw.chars().filter(|c| *c != '-').collect();
    let hex_like = hex.len() >= 12
        && hex.chars().all(|c| c.is_ascii_hexdigit())
        && hex.chars().any(|c| c.is_ascii_digit())
        && hex.chars().any(|c| c.is_ascii_alphabetic());
    let after_word = after_id_word && idish(raw) && raw.chars().any(|c| c.is_ascii_digit());
    (hex_like || after_word || is_code(raw)).then(|| raw.to_owned())
}

/// A product or reference code: capitals, a dash or underscore, digits (`DRY-0042`).
fn is_code(raw: &str) -> bool {
    let Some((head, tail)) = raw.split_once(['-', '_']) else {
        return false;
    };
    (1..=6).contains(&head.len())
        && head.chars().all(|c| c.is_ascii_uppercase())
        && (1..=10).contains(&tail.len())
        && tail.chars().all(|c| c.is_ascii_digit())
}

fn email(word: &str) -> Option<String> {
    let word = word.trim_start_matches("mailto:").trim_matches(['<', '>']);
    let (user, domain) = word.split_once('@')?;
    let valid = !user.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !word.contains(char::is_whitespace);
    valid.then(|| word.to_owned())
}

/// `+4512345678`, also written in groups: `+45 12 34 56 78`.
fn phones(toks: &[Token]) -> Vec<String> {
    let mut found = Vec::new();
    for (i, tok) in toks.iter().enumerate() {
        let Some(rest) = tok.raw.strip_prefix('+') else {
            continue;
        };
        let mut digits: String = rest.chars().filter(char::is_ascii_digit).collect();
        if rest
            .chars()
            .any(|c| !(c.is_ascii_digit() || "-() ".contains(c)))
        {
            continue;
        }
        for group in toks[i + 1..].iter().take(6) {
            if digits.len() >= 15 || !group.raw.bytes().all(|b| b.is_ascii_digit()) {
                break;
            }
            digits.push_str(&group.raw);
        }
        if (7..=15).contains(&digits.len()) {
            found.push(format!("+{digits}"));
        }
    }
    found
}

// ---------------------------------------------------------------------------------
// Names and free text

/// A capitalised name after "for", "named", "called", "name (is)" or "under (the name)".
fn person(toks: &[Token]) -> Option<String> {
    (0..toks.len()).find_map(|i| {
        if !listed(NAME_CUES, toks[i].lower.as_str()) {
            return None;
        }
        let mut j = i + 1;
        while toks
            .get(j)
            .is_some_and(|t| matches!(t.lower.as_str(), "is" | "the" | "name" | "a"))
        {
            j += 1;
        }
        let name = capitalised_run(toks.get(j..).unwrap_or_default());
        (!name.is_empty()).then(|| name.join(" "))
    })
}

fn capitalised_run(toks: &[Token]) -> Vec<&str> {
    let mut name = Vec::new();
    for tok in toks.iter().take(4) {
        let capital = tok.raw.chars().next().is_some_and(char::is_uppercase);
        let wordlike = tok
            .raw
            .chars()
            .all(|c| c.is_alphabetic() || "'’-.".contains(c));
        if !capital || !wordlike || words::is_stop_word(&tok.lower) {
            break;
        }
        name.push(tok.raw.as_str());
        if tok.ends_clause {
            break;
        }
    }
    name
}

/// The first text in double or curly quotes, or in single quotes that are not
/// apostrophes.
fn quoted(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    for (open, close) in [('"', '"'), ('“', '”'), ('‘', '’'), ('\'', '\'')] {
        let mut start = None;
        for (i, &c) in chars.iter().enumerate() {
            let before = i.checked_sub(1).map(|j| chars[j]);
            let after = chars.get(i + 1).copied();
            match start {
                None if c == open && (open != '\'' || before.is_none_or(char::is_whitespace)) => {
                    start = Some(i + 1);
                }
                Some(s)
                    if c == close
                        && (close != '\''
                            || after.is_none_or(|a| a.is_whitespace() || ",.!?;:".contains(a))) =>
                {
                    let inner: String = chars[s..i].iter().collect();
                    if !inner.trim().is_empty() {
                        return Some(inner.trim().to_owned());
                    }
                    start = None;
                }
                _ => {}
            }
        }
    }
    None
}

/// "…#42: allergic to nuts": a colon that ends a word, not one inside "19:00".
fn labelled(text: &str) -> Option<Labelled> {
    let (head, tail) = text
        .match_indices(':')
        .map(|(at, _)| (&text[..at], &text[at + 1..]))
        .find(|(_, tail)| tail.starts_with(char::is_whitespace))?;
    let body = tail.trim().trim_end_matches(['?', '!']).trim();
    let label = head.split_whitespace().last()?.to_lowercase();
    (!body.is_empty()).then(|| Labelled {
        label,
        text: body.to_owned(),
    })
}

// ---------------------------------------------------------------------------------
// Intent

/// "Which customer has…", "who spent…", "what is the highest…": one record wanted.
fn singular(toks: &[Token]) -> bool {
    let second = word_at(toks, Some(1));
    match word_at(toks, Some(0)) {
        "who" | "whose" => !matches!(second, "are" | "were" | "have"),
        "which" | "what" => {
            matches!(second, "is" | "was" | "has")
                || (second.len() > 2
                    && !second.ends_with('s')
                    && !words::is_stop_word(second)
                    && !matches!(word_at(toks, Some(2)), "are" | "were" | "have"))
        }
        _ => false,
    }
}

fn weekdays(toks: &[Token]) -> Vec<(usize, bool)> {
    let mut found: Vec<(usize, bool)> = Vec::new();
    for tok in toks {
        let single = tok.lower.strip_suffix('s').unwrap_or(&tok.lower);
        if let Some(day) = WEEKDAYS.iter().position(|w| *w == single)
            && !found.iter().any(|(d, _)| *d == day)
        {
            found.push((day, single.len() < tok.lower.len()));
        }
    }
    found
}

fn counting(toks: &[Token]) -> bool {
    toks.iter().enumerate().any(|(i, t)| {
        let next = word_at(toks, Some(i + 1));
        (t.lower == "how" && next == "many")
            || (t.lower == "number" && next == "of")
            || t.lower == "count"
    })
}

/// The noun phrase after "how many", "number of" or "count": up to three words, up to
/// and including the first plural.
fn counted(toks: &[Token]) -> Vec<String> {
    let mut found = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        let next = word_at(toks, Some(i + 1));
        let start = match t.lower.as_str() {
            "how" if next == "many" => i + 2,
            "number" if next == "of" => i + 2,
            "count" => i + 1,
            _ => continue,
        };
        let phrase = noun_phrase(&toks[start.min(toks.len())..]);
        if !phrase.is_empty() {
            found.push(phrase);
        }
    }
    found
}

fn noun_phrase(toks: &[Token]) -> String {
    let mut words: Vec<&str> = Vec::new();
    for tok in toks
        .iter()
        .skip_while(|t| listed(DETERMINERS, t.lower.as_str()))
    {
        let word = tok.lower.as_str();
        let verbish = word.ends_with("ed") && word.len() > 4;
        if listed(COUNT_BREAKS, word) || verbish || !word.chars().all(char::is_alphabetic) {
            break;
        }
        words.push(word);
        if words.len() == 3 || word.ends_with('s') || tok.ends_clause {
            break;
        }
    }
    words.join(" ")
}

/// Action verbs in the position of a request: opening a clause, or after "please",
/// "to", "you"; and not in a question that opens with "how", "what", "did" and such.
fn actions(toks: &[Token]) -> Vec<String> {
    if toks
        .first()
        .is_some_and(|t| listed(QUESTION_OPENERS, t.lower.as_str()))
    {
        return Vec::new();
    }
    let mut found = Vec::new();
    for (i, tok) in toks.iter().enumerate() {
        let clause_start = i == 0 || toks[i - 1].ends_clause;
        let led = i > 0 && listed(REQUEST_LEADS, toks[i - 1].lower.as_str());
        let is_action = words::ACTION_GROUPS
            .iter()
            .any(|group| listed(group, &tok.lower));
        if is_action && (clause_start || led) && !found.contains(&tok.lower) {
            found.push(tok.lower.clone());
        }
    }
    found
}
