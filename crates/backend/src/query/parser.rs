//! AST and recursive-descent parser for the filter language.
//!
//! Grammar (AND binds tighter than OR; a comma is AND):
//!
//! ```text
//! or        := and (OR and)*
//! and       := primary ((AND | ',') primary)*
//! primary   := '(' or ')' | condition
//! condition := field (op value | IS [NOT] NULL)
//! ```
//!
//! Parsing does not need the resource: field names and value types are checked when
//! compiling, so the AST can be built, printed and re-parsed on its own.

use std::fmt;

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveTime};

use super::lexer::{Kw, Lexer, SYNTAX_HINT, Tok, Token, VALUE_HINT};
use super::{MAX_CONDITIONS, MAX_DEPTH, QueryError, check_length, shorten};

/// A filter expression. `And`/`Or` hold at least two items and are kept flat (an `And`
/// never directly contains an `And`, nor an `Or` an `Or`); build them with
/// [`Expr::and`] / [`Expr::or`] to keep that shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Cond(Condition),
}

/// `field op value`, `field IS NULL` or `field IS NOT NULL`.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// The field name as written by the client (checked against the resource when compiling).
    pub field: String,
    /// Character offset of the field name in the input (0 for built ASTs).
    pub pos: usize,
    pub pred: Predicate,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    Compare {
        op: Op,
        value: Literal,
        /// Character offset of the value in the input (0 for built ASTs).
        value_pos: usize,
    },
    IsNull,
    IsNotNull,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Like,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// A quoted value.
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Date(NaiveDate),
    /// A date-time written without an offset is parsed as UTC.
    DateTime(DateTime<FixedOffset>),
    Time(NaiveTime),
}

impl Expr {
    /// AND of `items`, flattening nested ANDs; a single item is returned as is.
    pub fn and(items: Vec<Expr>) -> Expr {
        Self::flat(items, true)
    }

    /// OR of `items`, flattening nested ORs; a single item is returned as is.
    pub fn or(items: Vec<Expr>) -> Expr {
        Self::flat(items, false)
    }

    fn flat(items: Vec<Expr>, and: bool) -> Expr {
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Expr::And(inner) if and => out.extend(inner),
                Expr::Or(inner) if !and => out.extend(inner),
                other => out.push(other),
            }
        }
        if out.len() == 1
            && let Some(only) = out.pop()
        {
            return only;
        }
        if and { Expr::And(out) } else { Expr::Or(out) }
    }

    /// The expression as filter text that [`parse`] reads back to the same AST
    /// (apart from positions).
    pub fn to_query_string(&self) -> String {
        self.to_string()
    }
}

/// Parses a `customQuery` value. Empty input is an error here; [`super::compile_filter`]
/// treats it as "no filter".
pub fn parse(input: &str) -> Result<Expr, QueryError> {
    check_length(input, "customQuery")?;
    let mut lexer = Lexer::new(input);
    let cur = lexer.next_token()?;
    let end = lexer.len();
    let mut p = Parser {
        lexer,
        cur,
        end,
        depth: 0,
        conditions: 0,
    };
    if p.cur.is_none() {
        return Err(QueryError::at(
            0,
            format!("the filter is empty; {SYNTAX_HINT}"),
        ));
    }
    let expr = p.or()?;
    match &p.cur {
        None => Ok(expr),
        Some(t) if t.tok == Tok::RParen => Err(QueryError::at(
            t.pos,
            format!(
                "unexpected ')' at position {} without a matching '('; {SYNTAX_HINT}",
                t.pos
            ),
        )),
        Some(t) => Err(QueryError::at(
            t.pos,
            format!(
                "expected AND, OR, ',' or the end of the filter at position {}, found {}; {SYNTAX_HINT}",
                t.pos,
                found(Some(t))
            ),
        )),
    }
}

struct Parser {
    lexer: Lexer,
    /// The lookahead token; `None` at end of input.
    cur: Option<Token>,
    end: usize,
    depth: usize,
    conditions: usize,
}

/// How a token (or the end of input) is named in error messages.
fn found(t: Option<&Token>) -> String {
    match t {
        Some(t) => format!("'{}'", shorten(&t.text)),
        None => "the end of the filter".to_string(),
    }
}

impl Parser {
    /// Consumes the lookahead token and lexes the next one.
    fn bump(&mut self) -> Result<Option<Token>, QueryError> {
        let next = self.lexer.next_token()?;
        Ok(std::mem::replace(&mut self.cur, next))
    }

    fn cur_pos(&self) -> usize {
        self.cur.as_ref().map_or(self.end, |t| t.pos)
    }

    fn at(&self, tok: &Tok) -> bool {
        self.cur.as_ref().is_some_and(|t| &t.tok == tok)
    }

    fn or(&mut self) -> Result<Expr, QueryError> {
        let mut items = vec![self.and()?];
        while self.at(&Tok::Kw(Kw::Or)) {
            self.bump()?;
            items.push(self.and()?);
        }
        Ok(Expr::or(items))
    }

    fn and(&mut self) -> Result<Expr, QueryError> {
        let mut items = vec![self.primary()?];
        while self.at(&Tok::Kw(Kw::And)) || self.at(&Tok::Comma) {
            self.bump()?;
            items.push(self.primary()?);
        }
        Ok(Expr::and(items))
    }

    fn primary(&mut self) -> Result<Expr, QueryError> {
        if !self.at(&Tok::LParen) {
            return self.condition().map(Expr::Cond);
        }
        let open = self.cur_pos();
        if self.depth >= MAX_DEPTH {
            return Err(QueryError::at(
                open,
                format!(
                    "parentheses are nested too deeply at position {open}; at most {MAX_DEPTH} levels are allowed"
                ),
            ));
        }
        self.depth += 1;
        self.bump()?;
        let inner = self.or()?;
        match &self.cur {
            Some(t) if t.tok == Tok::RParen => {}
            None => {
                return Err(QueryError::at(
                    open,
                    format!(
                        "missing ')' to close the '(' at position {open}; every '(' needs a matching ')'"
                    ),
                ));
            }
            Some(t) => {
                return Err(QueryError::at(
                    t.pos,
                    format!(
                        "expected AND, OR, ',' or ')' at position {}, found {}; {SYNTAX_HINT}",
                        t.pos,
                        found(Some(t))
                    ),
                ));
            }
        }
        self.bump()?;
        self.depth -= 1;
        Ok(inner)
    }

    fn condition(&mut self) -> Result<Condition, QueryError> {
        let pos = self.cur_pos();
        let field = match &self.cur {
            Some(Token {
                tok: Tok::Ident(name),
                ..
            }) => name.clone(),
            other => {
                return Err(QueryError::at(
                    pos,
                    format!(
                        "expected a field name at position {pos}, found {}; {SYNTAX_HINT}",
                        found(other.as_ref())
                    ),
                ));
            }
        };
        self.conditions += 1;
        if self.conditions > MAX_CONDITIONS {
            return Err(QueryError::at(
                pos,
                format!(
                    "too many conditions: the condition at position {pos} is number {}, \
                     at most {MAX_CONDITIONS} are allowed",
                    self.conditions
                ),
            ));
        }
        self.bump()?;
        let op_pos = self.cur_pos();
        let op = match self.cur.as_ref().map(|t| &t.tok) {
            Some(Tok::Op(op)) => *op,
            Some(Tok::Kw(Kw::Like)) => Op::Like,
            Some(Tok::Kw(Kw::Is)) => return self.is_null(field, pos),
            Some(Tok::LParen) => {
                return Err(QueryError::at(
                    pos,
                    format!(
                        "function calls like '{}(...)' are not supported (position {pos}); {SYNTAX_HINT}",
                        shorten(&field)
                    ),
                ));
            }
            _ => {
                return Err(QueryError::at(
                    op_pos,
                    format!(
                        "expected an operator after field '{}' at position {op_pos}, found {}; {SYNTAX_HINT}",
                        shorten(&field),
                        found(self.cur.as_ref())
                    ),
                ));
            }
        };
        let op_text = self.bump()?.map(|t| t.text).unwrap_or_default();
        let value_pos = self.cur_pos();
        let value = match self.cur.as_ref().map(|t| &t.tok) {
            Some(Tok::Str(s)) => Literal::Str(s.clone()),
            Some(Tok::Int(i)) => Literal::Int(*i),
            Some(Tok::Float(f)) => Literal::Float(*f),
            Some(Tok::Date(d)) => Literal::Date(*d),
            Some(Tok::DateTime(dt)) => Literal::DateTime(*dt),
            Some(Tok::Time(t)) => Literal::Time(*t),
            Some(Tok::Kw(Kw::True)) => Literal::Bool(true),
            Some(Tok::Kw(Kw::False)) => Literal::Bool(false),
            Some(Tok::Kw(Kw::Null)) => {
                let instead = if op == Op::Ne {
                    "IS NOT NULL"
                } else {
                    "IS NULL"
                };
                return Err(QueryError::at(
                    value_pos,
                    format!(
                        "NULL cannot be compared with '{op_text}' (position {value_pos}); write `{} {instead}` instead",
                        shorten(&field)
                    ),
                ));
            }
            Some(Tok::Ident(word)) => {
                return Err(QueryError::at(
                    value_pos,
                    format!(
                        "unquoted value '{w}' at position {value_pos} — put text values in quotes, e.g. {} = '{w}'",
                        shorten(&field),
                        w = shorten(word)
                    ),
                ));
            }
            _ => {
                return Err(QueryError::at(
                    value_pos,
                    format!(
                        "expected a value after '{op_text}' at position {value_pos}, found {}; {VALUE_HINT}",
                        found(self.cur.as_ref())
                    ),
                ));
            }
        };
        self.bump()?;
        Ok(Condition {
            field,
            pos,
            pred: Predicate::Compare {
                op,
                value,
                value_pos,
            },
        })
    }

    /// The rest of `field IS [NOT] NULL`, with the lookahead on `IS`.
    fn is_null(&mut self, field: String, pos: usize) -> Result<Condition, QueryError> {
        self.bump()?;
        let negated = self.at(&Tok::Kw(Kw::Not));
        if negated {
            self.bump()?;
        }
        if !self.at(&Tok::Kw(Kw::Null)) {
            let at = self.cur_pos();
            return Err(QueryError::at(
                at,
                format!(
                    "expected NULL at position {at}, found {}; IS is only used as `{f} IS NULL` or `{f} IS NOT NULL`",
                    found(self.cur.as_ref()),
                    f = shorten(&field)
                ),
            ));
        }
        self.bump()?;
        Ok(Condition {
            field,
            pos,
            pred: if negated {
                Predicate::IsNotNull
            } else {
                Predicate::IsNull
            },
        })
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (items, sep) = match self {
            Expr::Cond(c) => return c.fmt(f),
            Expr::And(items) => (items, " AND "),
            Expr::Or(items) => (items, " OR "),
        };
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                f.write_str(sep)?;
            }
            // Any compound item needs parentheses: an OR inside an AND for precedence, and
            // same-kind nesting (not produced by the parser) to keep the tree as built.
            match item {
                Expr::Cond(c) => write!(f, "{c}")?,
                Expr::And(_) if sep == " OR " => write!(f, "{item}")?,
                _ => write!(f, "({item})")?,
            }
        }
        Ok(())
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pred {
            Predicate::Compare { op, value, .. } => write!(f, "{} {op} {value}", self.field),
            Predicate::IsNull => write!(f, "{} IS NULL", self.field),
            Predicate::IsNotNull => write!(f, "{} IS NOT NULL", self.field),
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Like => "LIKE",
        })
    }
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Str(s) => {
                f.write_str("'")?;
                for c in s.chars() {
                    match c {
                        '\'' => f.write_str("''")?,
                        '\\' => f.write_str("\\\\")?,
                        c => write!(f, "{c}")?,
                    }
                }
                f.write_str("'")
            }
            Literal::Int(i) => write!(f, "{i}"),
            Literal::Float(x) => {
                // Rust never uses an exponent here; keep a '.' so it reads back as a decimal.
                let s = x.to_string();
                if s.contains('.') || !x.is_finite() {
                    f.write_str(&s)
                } else {
                    write!(f, "{s}.0")
                }
            }
            Literal::Bool(b) => write!(f, "{b}"),
            Literal::Date(d) => write!(f, "{}", d.format("%Y-%m-%d")),
            Literal::DateTime(dt) => {
                write!(f, "{}", dt.format("%Y-%m-%dT%H:%M:%S%.f"))?;
                if dt.offset().local_minus_utc() == 0 {
                    f.write_str("Z")
                } else {
                    write!(f, "{}", dt.format("%:z"))
                }
            }
            Literal::Time(t) => {
                use chrono::Timelike;
                let fmt = match (t.second(), t.nanosecond()) {
                    (0, 0) => "%H:%M",
                    (_, 0) => "%H:%M:%S",
                    _ => "%H:%M:%S%.f",
                };
                write!(f, "{}", t.format(fmt))
            }
        }
    }
}
