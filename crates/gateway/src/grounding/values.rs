//! Reading one value the way people write it: digits with thousands separators,
//! counting words ("forty", "sixty-two"), amounts of money, dates in several
//! orders, clock times in 12 and 24 hours.

/// A calendar date; `year` is `None` when the text leaves it out ("25 November").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Day {
    pub year: Option<i32>,
    pub month: u32,
    pub day: u32,
}

impl Day {
    pub(crate) fn new(year: Option<i32>, month: u32, day: u32) -> Option<Self> {
        let valid = (1..=12).contains(&month)
            && (1..=31).contains(&day)
            && year.is_none_or(|y| chrono::NaiveDate::from_ymd_opt(y, month, day).is_some());
        valid.then_some(Self { year, month, day })
    }

    /// `2026-11-25`, or `--11-25` without a year (ISO 8601's form for that).
    pub(crate) fn written(&self) -> String {
        match self.year {
            Some(year) => format!("{year:04}-{:02}-{:02}", self.month, self.day),
            None => format!("--{:02}-{:02}", self.month, self.day),
        }
    }

    /// The same day, a year left out on either side matching any year.
    pub(crate) fn same(&self, other: &Day) -> bool {
        self.month == other.month
            && self.day == other.day
            && (self.year.is_none() || other.year.is_none() || self.year == other.year)
    }
}

/// A time of day, 24-hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Clock {
    pub hour: u32,
    pub minute: u32,
}

impl Clock {
    pub(crate) fn new(hour: u32, minute: u32) -> Option<Self> {
        (hour < 24 && minute < 60).then_some(Self { hour, minute })
    }

    pub(crate) fn written(&self) -> String {
        format!("{:02}:{:02}", self.hour, self.minute)
    }
}

/// Digits as people write them: `60`, `1,200`, `12.50`, `-3`. Not `1.2.3`.
pub(crate) fn digits(text: &str) -> Option<f64> {
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    if body.is_empty() || !body.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let (whole, fraction) = match body.split_once('.') {
        Some((w, f)) if !f.is_empty() && f.chars().all(|c| c.is_ascii_digit()) => (w, Some(f)),
        Some(_) => return None,
        None => (body, None),
    };
    let grouped = whole.contains(',');
    if grouped {
        let mut groups = whole.split(',');
        let first = groups.next().unwrap_or_default();
        let first_ok = (1..=3).contains(&first.len()) && first.chars().all(|c| c.is_ascii_digit());
        if !first_ok || !groups.all(|g| g.len() == 3 && g.chars().all(|c| c.is_ascii_digit())) {
            return None;
        }
    } else if !whole.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let plain: String = whole.chars().filter(|c| *c != ',').collect();
    let number = match fraction {
        Some(f) => format!("{plain}.{f}"),
        None => plain,
    };
    let value: f64 = number.parse().ok()?;
    Some(if text.starts_with('-') { -value } else { value })
}

/// A number written the one way the wire carries it: `60`, `12.5`.
pub(crate) fn written_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        let text = format!("{n:.4}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

pub(crate) fn same_number(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.005
}

const UNITS: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
const TENS: [&str; 8] = [
    "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];

/// One counting word or a hyphenated pair: "forty" → 40, "sixty-two" → 62.
pub(crate) fn number_word(word: &str) -> Option<u32> {
    if let Some((tens, unit)) = word.split_once('-') {
        let tens = tens_word(tens)?;
        let unit = unit_word(unit).filter(|u| (1..10).contains(u))?;
        return Some(tens + unit);
    }
    unit_word(word).or_else(|| tens_word(word))
}

pub(crate) fn unit_word(word: &str) -> Option<u32> {
    UNITS.iter().position(|w| *w == word).map(|i| i as u32)
}

pub(crate) fn tens_word(word: &str) -> Option<u32> {
    TENS.iter()
        .position(|w| *w == word)
        .map(|i| 20 + 10 * i as u32)
}

pub(crate) fn month(word: &str) -> Option<u32> {
    maitred_offline_model::month_number(word.trim_end_matches('.'))
}

pub(crate) use maitred_offline_model::WEEKDAYS;

/// A day of the month, maybe with its ordinal ending: "25", "25th", "1st".
pub(crate) fn day_of_month(word: &str) -> Option<u32> {
    let digits_end = word
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(word.len());
    let (number, ending) = word.split_at(digits_end);
    if number.is_empty() || number.len() > 2 || !["", "st", "nd", "rd", "th"].contains(&ending) {
        return None;
    }
    number.parse().ok().filter(|d| (1..=31).contains(d))
}

pub(crate) fn year(word: &str) -> Option<i32> {
    (word.len() == 4 && word.chars().all(|c| c.is_ascii_digit()))
        .then(|| word.parse().ok())
        .flatten()
        .filter(|y| (1900..=2200).contains(y))
}

/// `2026-11-25`, alone or at the start of a timestamp (`2026-11-25T19:00:00Z`).
pub(crate) fn iso_date(text: &str) -> Option<Day> {
    let head = text.get(..10)?;
    let rest = &text[10..];
    if !(rest.is_empty() || rest.starts_with(['T', ' ', 't'])) {
        return None;
    }
    let mut parts = head.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    Day::new(Some(y.parse().ok()?), m.parse().ok()?, d.parse().ok()?)
}

/// `25/11/2026`, `25/11`, `11/25/2026`: day first where that is a date, else month first.
/// Both readings, when both are dates.
pub(crate) fn slashed_date(text: &str) -> Vec<Day> {
    let parts: Vec<&str> = text.split(['/', '.']).collect();
    if !(2..=3).contains(&parts.len())
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()))
        || parts[0].len() > 2
        || parts[1].len() > 2
    {
        return Vec::new();
    }
    let year = match parts.get(2) {
        Some(y) if y.len() == 4 => y.parse().ok(),
        Some(y) if y.len() == 2 => y.parse::<i32>().ok().map(|y| 2000 + y),
        Some(_) => return Vec::new(),
        None => None,
    };
    if parts.len() == 3 && year.is_none() {
        return Vec::new();
    }
    let (a, b): (u32, u32) = match (parts[0].parse(), parts[1].parse()) {
        (Ok(a), Ok(b)) => (a, b),
        _ => return Vec::new(),
    };
    let mut readings: Vec<Day> = [Day::new(year, b, a), Day::new(year, a, b)]
        .into_iter()
        .flatten()
        .collect();
    readings.dedup();
    readings
}

/// `19:00`, `7:30`, `19:00:00`, with what follows the digits (`pm`, or nothing).
pub(crate) fn clock_digits(text: &str) -> Option<(u32, u32, &str)> {
    let (hour, rest) = text.split_once(':')?;
    if hour.is_empty() || hour.len() > 2 || !hour.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let minute = rest.get(..2)?;
    if !minute.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let mut after = &rest[2..];
    if let Some(seconds) = after.strip_prefix(':')
        && seconds
            .get(..2)
            .is_some_and(|s| s.chars().all(|c| c.is_ascii_digit()))
    {
        after = &seconds[2..];
    }
    Some((hour.parse().ok()?, minute.parse().ok()?, after))
}

/// `am`/`pm` in its spellings: `Some(true)` for the afternoon.
pub(crate) fn meridiem(word: &str) -> Option<bool> {
    match word.trim_end_matches('.') {
        "am" | "a.m" => Some(false),
        "pm" | "p.m" => Some(true),
        _ => None,
    }
}

/// A 12-hour reading to 24 hours.
pub(crate) fn with_meridiem(hour: u32, afternoon: bool) -> Option<u32> {
    match (hour, afternoon) {
        (1..=11, true) => Some(hour + 12),
        (12, false) => Some(0),
        (1..=12, _) => Some(hour),
        _ => None,
    }
}

/// `7pm`, `7.30pm`, `10am`: a time and its half of the day in one word.
pub(crate) fn clock_word(word: &str) -> Option<Clock> {
    let split = word.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, suffix) = word.split_at(split);
    let afternoon = meridiem(suffix)?;
    let (hour, minute) = match number.split_once(['.', ':']) {
        Some((h, m)) if m.len() == 2 => (h.parse().ok()?, m.parse().ok()?),
        Some(_) => return None,
        None => (number.parse().ok()?, 0),
    };
    Clock::new(with_meridiem(hour, afternoon)?, minute)
}

/// Currency signs and words, as a person writes them before or after an amount.
pub(crate) fn currency_sign(c: char) -> bool {
    matches!(c, '$' | '€' | '£' | '¥')
}

pub(crate) fn currency_word(word: &str) -> bool {
    matches!(
        word,
        "eur" | "euro" | "euros" | "usd" | "dollar" | "dollars" | "gbp" | "pound" | "pounds"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_take_thousands_separators_and_decimals() {
        assert_eq!(digits("60"), Some(60.0));
        assert_eq!(digits("1,200"), Some(1200.0));
        assert_eq!(digits("12,345.50"), Some(12345.5));
        assert_eq!(digits("-3"), Some(-3.0));
        assert_eq!(digits("1,2"), None);
        assert_eq!(digits("1.2.3"), None);
        assert_eq!(digits("abc"), None);
        assert_eq!(written_number(1200.0), "1200");
        assert_eq!(written_number(12.5), "12.5");
    }

    #[test]
    fn counting_words_are_numbers() {
        assert_eq!(number_word("forty"), Some(40));
        assert_eq!(number_word("sixty-two"), Some(62));
        assert_eq!(number_word("seven"), Some(7));
        assert_eq!(number_word("forty-ten"), None);
        assert_eq!(number_word("fort"), None);
    }

    #[test]
    fn dates_in_several_orders() {
        assert_eq!(iso_date("2026-11-25").unwrap().written(), "2026-11-25");
        assert_eq!(
            iso_date("2026-11-25T19:00:00Z").unwrap().written(),
            "2026-11-25"
        );
        assert_eq!(iso_date("2026-13-25"), None);
        let both = slashed_date("05/11/2026");
        assert_eq!(both.len(), 2);
        assert_eq!(both[0].written(), "2026-11-05");
        assert_eq!(slashed_date("25/11")[0].written(), "--11-25");
        assert_eq!(slashed_date("11/25/2026").len(), 1);
        assert_eq!(day_of_month("25th"), Some(25));
        assert_eq!(day_of_month("32"), None);
        assert_eq!(month("Nov.".to_lowercase().as_str()), Some(11));
        assert!(
            Day::new(None, 11, 25)
                .unwrap()
                .same(&Day::new(Some(2026), 11, 25).unwrap())
        );
    }

    #[test]
    fn times_in_12_and_24_hours() {
        assert_eq!(clock_digits("19:00"), Some((19, 0, "")));
        assert_eq!(clock_digits("7:30pm"), Some((7, 30, "pm")));
        assert_eq!(clock_word("7pm").unwrap().written(), "19:00");
        assert_eq!(clock_word("7.30pm").unwrap().written(), "19:30");
        assert_eq!(clock_word("12am").unwrap().written(), "00:00");
        assert_eq!(clock_word("7kg"), None);
    }
}
