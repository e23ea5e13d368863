//! Tokeniser for the filter language, pulled one token at a time by the parser so that
//! errors are reported in input order.

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveTime};

use super::parser::Op;
use super::{QueryError, shorten};

/// What a condition looks like; appended to syntax errors so the client can fix its query.
pub(super) const SYNTAX_HINT: &str = "conditions look like `field op value` with op one of = != > >= < <= LIKE, \
     or `field IS [NOT] NULL`, joined by AND/OR/commas with parentheses";

/// What a value looks like.
pub(super) const VALUE_HINT: &str = "values are quoted text ('abc'), numbers (42, -3.5), true/false, \
     or dates/times (2026-11-21, 2026-11-21T18:30:00Z, '18:30')";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kw {
    And,
    Or,
    Like,
    Is,
    Not,
    Null,
    True,
    False,
}

impl Kw {
    fn from_word(w: &str) -> Option<Kw> {
        const KWS: [(&str, Kw); 8] = [
            ("AND", Kw::And),
            ("OR", Kw::Or),
            ("LIKE", Kw::Like),
            ("IS", Kw::Is),
            ("NOT", Kw::Not),
            ("NULL", Kw::Null),
            ("TRUE", Kw::True),
            ("FALSE", Kw::False),
        ];
        KWS.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(w))
            .map(|(_, kw)| *kw)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    /// A field name (possibly dotted); never a keyword.
    Ident(String),
    Kw(Kw),
    Str(String),
    Int(i64),
    Float(f64),
    Date(NaiveDate),
    DateTime(DateTime<FixedOffset>),
    Time(NaiveTime),
    /// Comparison operators written with symbols (LIKE is a keyword).
    Op(Op),
    LParen,
    RParen,
    Comma,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Token {
    pub tok: Tok,
    /// Character offset of the token's first character.
    pub pos: usize,
    /// The token as written, for error messages.
    pub text: String,
}

pub(super) struct Lexer {
    chars: Vec<char>,
    i: usize,
}

impl Lexer {
    pub(super) fn new(input: &str) -> Self {
        Lexer {
            chars: input.chars().collect(),
            i: 0,
        }
    }

    /// Length of the input in characters (the position reported for "end of input").
    pub(super) fn len(&self) -> usize {
        self.chars.len()
    }

    fn peek_at(&self, k: usize) -> Option<char> {
        self.chars.get(self.i + k).copied()
    }

    fn token(&mut self, tok: Tok, start: usize, end: usize) -> Token {
        self.i = end;
        Token {
            tok,
            pos: start,
            text: self.chars[start..end].iter().collect(),
        }
    }

    /// The next token, `None` at end of input.
    pub(super) fn next_token(&mut self) -> Result<Option<Token>, QueryError> {
        while self.peek_at(0).is_some_and(char::is_whitespace) {
            self.i += 1;
        }
        let start = self.i;
        let Some(c) = self.peek_at(0) else {
            return Ok(None);
        };
        let next = self.peek_at(1);
        let tok = match c {
            '(' => self.token(Tok::LParen, start, start + 1),
            ')' => self.token(Tok::RParen, start, start + 1),
            ',' => self.token(Tok::Comma, start, start + 1),
            '=' if next == Some('=') => {
                return Err(QueryError::at(
                    start,
                    format!("'==' at position {start} is not an operator; use '=' to compare"),
                ));
            }
            '=' => self.token(Tok::Op(Op::Eq), start, start + 1),
            '!' if next == Some('=') => self.token(Tok::Op(Op::Ne), start, start + 2),
            '<' if next == Some('=') => self.token(Tok::Op(Op::Le), start, start + 2),
            '<' if next == Some('>') => self.token(Tok::Op(Op::Ne), start, start + 2),
            '<' => self.token(Tok::Op(Op::Lt), start, start + 1),
            '>' if next == Some('=') => self.token(Tok::Op(Op::Ge), start, start + 2),
            '>' => self.token(Tok::Op(Op::Gt), start, start + 1),
            '\'' | '"' => self.string(c, start)?,
            ';' => {
                return Err(QueryError::at(
                    start,
                    format!(
                        "';' at position {start} is not allowed: a filter is a single expression, \
                         not SQL; {SYNTAX_HINT}"
                    ),
                ));
            }
            '-' if next == Some('-') => return Err(comment_error(start, "--")),
            '/' if next == Some('*') => return Err(comment_error(start, "/*")),
            '&' | '|' if next == Some(c) => {
                let word = if c == '&' { "AND" } else { "OR" };
                return Err(QueryError::at(
                    start,
                    format!("'{c}{c}' at position {start} is not supported; write {word} instead"),
                ));
            }
            '-' if next.is_some_and(|n| n.is_ascii_digit()) => self.value_word(start)?,
            c if c.is_ascii_digit() => self.value_word(start)?,
            c if c.is_ascii_alphabetic() || c == '_' => self.word(start)?,
            c => {
                return Err(QueryError::at(
                    start,
                    format!(
                        "unexpected character '{c}' at position {start}; {SYNTAX_HINT}; \
                         text values must be in quotes"
                    ),
                ));
            }
        };
        Ok(Some(tok))
    }

    /// A quoted string; `''` (or `""`) and backslash escapes stand for the quote itself.
    fn string(&mut self, quote: char, start: usize) -> Result<Token, QueryError> {
        let mut j = start + 1;
        let mut value = String::new();
        let mut escaped_quote = false;
        loop {
            let Some(&c) = self.chars.get(j) else {
                // `'abc\'` is usually meant to end with a backslash, not to escape the quote.
                let hint = if escaped_quote {
                    "; a backslash before a quote escapes it, so write \\\\ for a backslash at the end"
                } else {
                    ""
                };
                return Err(QueryError::at(
                    start,
                    format!(
                        "unterminated text value starting at position {start}: close it with a \
                         matching {quote} (write {quote}{quote} for a {quote} inside the text){hint}"
                    ),
                ));
            };
            let next = self.chars.get(j + 1).copied();
            if c == quote {
                if next == Some(quote) {
                    value.push(quote);
                    j += 2;
                } else {
                    j += 1;
                    break;
                }
            } else if c == '\\' && matches!(next, Some('\\' | '\'' | '"')) {
                escaped_quote |= next == Some(quote);
                value.extend(next);
                j += 2;
            } else {
                value.push(c);
                j += 1;
            }
        }
        Ok(self.token(Tok::Str(value), start, j))
    }

    /// A field name or keyword.
    fn word(&mut self, start: usize) -> Result<Token, QueryError> {
        let is_start = |c: char| c.is_ascii_alphabetic() || c == '_';
        let is_cont = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let mut j = start + 1;
        loop {
            while self.chars.get(j).copied().is_some_and(is_cont) {
                j += 1;
            }
            if self.chars.get(j) != Some(&'.') {
                break;
            }
            if !self.chars.get(j + 1).copied().is_some_and(is_start) {
                let written: String = self.chars[start..=j].iter().collect();
                return Err(QueryError::at(
                    start,
                    format!(
                        "incomplete field name '{}' at position {start}: a '.' must be followed \
                         by the rest of the name, e.g. guest.email",
                        shorten(&written)
                    ),
                ));
            }
            j += 1;
        }
        let text: String = self.chars[start..j].iter().collect();
        let tok = match Kw::from_word(&text) {
            Some(kw) => Tok::Kw(kw),
            None => Tok::Ident(text),
        };
        Ok(self.token(tok, start, j))
    }

    /// An unquoted number, date, date-time or time.
    fn value_word(&mut self, start: usize) -> Result<Token, QueryError> {
        let mut j = start + 1;
        while let Some(&c) = self.chars.get(j) {
            let part = c.is_ascii_alphanumeric() || matches!(c, ':' | '.' | '+' | '_')
                // `--` starts a comment, which gets its own error.
                || (c == '-' && self.chars.get(j + 1) != Some(&'-'));
            if !part {
                break;
            }
            j += 1;
        }
        let text: String = self.chars[start..j].iter().collect();
        let tok = classify_value(&text).map_err(|why| {
            QueryError::at(
                start,
                format!(
                    "invalid value '{}' at position {start}: {why}; {VALUE_HINT}",
                    shorten(&text)
                ),
            )
        })?;
        Ok(self.token(tok, start, j))
    }
}

fn comment_error(pos: usize, what: &str) -> QueryError {
    QueryError::at(
        pos,
        format!("SQL comments ('{what}') are not allowed (position {pos}); {SYNTAX_HINT}"),
    )
}

/// Interprets an unquoted word that starts with a digit (or `-digit`).
fn classify_value(text: &str) -> Result<Tok, &'static str> {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if all_digits(unsigned) {
        return text
            .parse::<i64>()
            .map(Tok::Int)
            .map_err(|_| "the number is out of range");
    }
    if let Some((int, frac)) = unsigned.split_once('.')
        && all_digits(int)
        && all_digits(frac)
    {
        return match text.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Tok::Float(f)),
            _ => Err("the number is out of range"),
        };
    }
    if unsigned.len() == text.len() {
        match parse_temporal(text) {
            Some(Temporal::Date(d)) => return Ok(Tok::Date(d)),
            Some(Temporal::DateTime(dt)) => return Ok(Tok::DateTime(dt)),
            Some(Temporal::Time(t)) => return Ok(Tok::Time(t)),
            None => {}
        }
    }
    Err("not a number, date or time")
}

/// A date, date-time or time value, as written unquoted or inside quotes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Temporal {
    Date(NaiveDate),
    /// A date-time written without an offset is taken as UTC.
    DateTime(DateTime<FixedOffset>),
    Time(NaiveTime),
}

/// Parses `YYYY-MM-DD`, `YYYY-MM-DD[T ]HH:MM[:SS[.fff]][Z|±HH:MM|±HHMM|±HH]` or `H:MM[:SS[.fff]]`.
pub(super) fn parse_temporal(s: &str) -> Option<Temporal> {
    let b = s.as_bytes();
    if b.len() >= 10 && b[4] == b'-' && b[7] == b'-' {
        let date = NaiveDate::from_ymd_opt(
            i32::try_from(digits(b, 0, 4)?).ok()?,
            digits(b, 5, 2)?,
            digits(b, 8, 2)?,
        )?;
        if b.len() == 10 {
            return Some(Temporal::Date(date));
        }
        if !matches!(b[10], b'T' | b't' | b' ') {
            return None;
        }
        let (time, used) = clock(&b[11..], false)?;
        let offset = offset(&b[11 + used..])?;
        let dt = date.and_time(time).and_local_timezone(offset).single()?;
        return Some(Temporal::DateTime(dt));
    }
    match clock(b, true)? {
        (t, used) if used == b.len() => Some(Temporal::Time(t)),
        _ => None,
    }
}

/// `n` ASCII digits at `at`, as a number.
fn digits(b: &[u8], at: usize, n: usize) -> Option<u32> {
    let part = b.get(at..at + n)?;
    part.iter().try_fold(0u32, |acc, &d| {
        d.is_ascii_digit().then(|| acc * 10 + u32::from(d - b'0'))
    })
}

/// `HH:MM[:SS[.fraction]]` at the start of `b` (a one-digit hour if `short_hour`);
/// returns the time and the number of bytes used.
fn clock(b: &[u8], short_hour: bool) -> Option<(NaiveTime, usize)> {
    let hour_len = if short_hour && b.get(1) == Some(&b':') {
        1
    } else {
        2
    };
    let hour = digits(b, 0, hour_len)?;
    let mut i = hour_len;
    if b.get(i) != Some(&b':') {
        return None;
    }
    let minute = digits(b, i + 1, 2)?;
    i += 3;
    let mut second = 0;
    let mut nano = 0;
    if b.get(i) == Some(&b':') {
        second = digits(b, i + 1, 2)?;
        i += 3;
        if b.get(i) == Some(&b'.') {
            let n = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 || n > 9 {
                return None;
            }
            nano = digits(b, i + 1, n)? * 10u32.pow(9 - u32::try_from(n).ok()?);
            i += 1 + n;
        }
    }
    if second > 59 {
        return None;
    }
    Some((NaiveTime::from_hms_nano_opt(hour, minute, second, nano)?, i))
}

/// `""` (UTC), `Z`, `±HH:MM`, `±HHMM` or `±HH` making up all of `b`.
fn offset(b: &[u8]) -> Option<FixedOffset> {
    let (sign, rest) = match b {
        [] | [b'Z' | b'z'] => return FixedOffset::east_opt(0),
        [b'+', rest @ ..] => (1, rest),
        [b'-', rest @ ..] => (-1, rest),
        _ => return None,
    };
    let (h, m) = match rest.len() {
        2 => (digits(rest, 0, 2)?, 0),
        4 => (digits(rest, 0, 2)?, digits(rest, 2, 2)?),
        5 if rest[2] == b':' => (digits(rest, 0, 2)?, digits(rest, 3, 2)?),
        _ => return None,
    };
    if h > 23 || m > 59 {
        return None;
    }
    FixedOffset::east_opt(sign * i32::try_from(h * 3600 + m * 60).ok()?)
}
