use chrono::{FixedOffset, NaiveDate, NaiveTime, TimeZone};
use proptest::prelude::*;

use super::*;

const FIELDS: &[Field] = &[
    Field {
        name: "_id",
        column: "c.id",
        ty: FieldType::Text,
    },
    Field {
        name: "name",
        column: "c.name",
        ty: FieldType::Text,
    },
    Field {
        name: "email",
        column: "c.email",
        ty: FieldType::Text,
    },
    Field {
        name: "guest.email",
        column: "g.email",
        ty: FieldType::Text,
    },
    Field {
        name: "bookingCount",
        column: "c.booking_count",
        ty: FieldType::Integer,
    },
    Field {
        name: "people",
        column: "b.people",
        ty: FieldType::Integer,
    },
    Field {
        name: "duration",
        column: "b.duration",
        ty: FieldType::Integer,
    },
    Field {
        name: "amount",
        column: "b.amount",
        ty: FieldType::Float,
    },
    Field {
        name: "vip",
        column: "c.vip",
        ty: FieldType::Boolean,
    },
    Field {
        name: "date",
        column: "b.date",
        ty: FieldType::Date,
    },
    Field {
        name: "time",
        column: "b.time",
        ty: FieldType::Time,
    },
    Field {
        name: "createdAt",
        column: "c.created_at",
        ty: FieldType::DateTime,
    },
    Field {
        name: "a",
        column: "t.a",
        ty: FieldType::Integer,
    },
    Field {
        name: "b",
        column: "t.b",
        ty: FieldType::Integer,
    },
    Field {
        name: "c",
        column: "t.c",
        ty: FieldType::Integer,
    },
];

const RES: Resource = Resource {
    name: "customers",
    fields: FIELDS,
};

fn ok(input: &str) -> Filter {
    compile_filter(input, &RES, 1)
        .unwrap_or_else(|e| panic!("{input:?} failed: {}", e.message))
        .expect("non-empty filter")
}

/// Asserts that `input` compiles to `sql` with `binds`, numbered from $1.
fn compiles(input: &str, sql: &str, binds: &[BindValue]) {
    let f = ok(input);
    assert_eq!(f.sql, sql, "{input}");
    assert_eq!(f.binds, binds, "{input}");
}

fn err(input: &str) -> QueryError {
    match compile_filter(input, &RES, 1) {
        Ok(f) => panic!("{input:?} unexpectedly compiled to {f:?}"),
        Err(e) => e,
    }
}

fn text(s: &str) -> BindValue {
    BindValue::Text(s.to_string())
}

/// Asserts that compiling `input` fails with a message containing every one of `parts`.
fn err_has(input: &str, parts: &[&str]) -> QueryError {
    let e = err(input);
    for p in parts {
        assert!(
            e.message.contains(p),
            "{input:?}: message {:?} lacks {p:?}",
            e.message
        );
    }
    e
}

// ---------------------------------------------------------------- basics

#[test]
fn empty_input_is_no_filter() {
    assert_eq!(compile_filter("", &RES, 1).unwrap(), None);
    assert_eq!(compile_filter("  \t\n ", &RES, 1).unwrap(), None);
    assert!(parse("").is_err());
}

#[test]
fn simple_comparisons() {
    compiles("email = 'a@b.c'", "(c.email = $1)", &[text("a@b.c")]);
    for (op, sql) in [
        ("=", "="),
        ("!=", "<>"),
        ("<>", "<>"),
        (">", ">"),
        (">=", ">="),
        ("<", "<"),
        ("<=", "<="),
    ] {
        compiles(
            &format!("people {op} 3"),
            &format!("(b.people {sql} $1)"),
            &[BindValue::Int(3)],
        );
    }
    // No spaces needed.
    assert_eq!(ok("people>=3").sql, "(b.people >= $1)");
}

#[test]
fn first_placeholder_is_respected() {
    let f = compile_filter("people > 1 AND name = 'x'", &RES, 7)
        .unwrap()
        .unwrap();
    assert_eq!(f.sql, "(b.people > $7 AND c.name = $8)");
}

#[test]
fn like_example_exact_sql_and_binds() {
    compiles(
        "email LIKE '%@example.com' AND bookingCount > 2",
        "(LOWER(c.email) LIKE LOWER($1) ESCAPE '\\' AND c.booking_count > $2)",
        &[text("%@example.com"), BindValue::Int(2)],
    );
}

#[test]
fn keywords_are_case_insensitive() {
    compiles(
        "name like 'a%' and people is not null or vip = TRUE",
        "((LOWER(c.name) LIKE LOWER($1) ESCAPE '\\' AND b.people IS NOT NULL) OR c.vip = $2)",
        &[text("a%"), BindValue::Int(1)],
    );
}

#[test]
fn precedence_and_binds_tighter() {
    let f = ok("a = 1 OR b = 2 AND c = 3");
    assert_eq!(f.sql, "(t.a = $1 OR (t.b = $2 AND t.c = $3))");
    let f = ok("a = 1 AND b = 2 OR c = 3");
    assert_eq!(f.sql, "((t.a = $1 AND t.b = $2) OR t.c = $3)");
    let f = ok("a = 1 AND (b = 2 OR c = 3)");
    assert_eq!(f.sql, "(t.a = $1 AND (t.b = $2 OR t.c = $3))");
    // Redundant parentheses disappear, nested same-kind groups are flattened.
    compiles(
        "((a = 1)) AND (b = 2 AND c = 3)",
        "(t.a = $1 AND t.b = $2 AND t.c = $3)",
        &[BindValue::Int(1), BindValue::Int(2), BindValue::Int(3)],
    );
}

#[test]
fn comma_means_and() {
    let f = ok("people>1,duration>60");
    assert_eq!(f.sql, "(b.people > $1 AND b.duration > $2)");
    let f = ok("a = 1 OR b = 2, c = 3");
    assert_eq!(f.sql, "(t.a = $1 OR (t.b = $2 AND t.c = $3))");
}

#[test]
fn is_null_and_is_not_null() {
    assert_eq!(ok("email IS NULL").sql, "(c.email IS NULL)");
    assert_eq!(
        ok("createdAt is not null").sql,
        "(c.created_at IS NOT NULL)"
    );
    assert!(ok("vip IS NULL").binds.is_empty());
    err_has("email = NULL", &["IS NULL"]);
    err_has("email != null", &["IS NOT NULL"]);
    err_has("email IS 'x'", &["expected NULL"]);
    err_has("email IS NOT", &["expected NULL"]);
}

#[test]
fn dotted_and_underscore_fields() {
    let f = ok("guest.email = 'x' AND _id = 'abc'");
    assert_eq!(f.sql, "(g.email = $1 AND c.id = $2)");
    err_has("guest. = 'x'", &["incomplete field name"]);
    err_has("guest.mail = 'x'", &["unknown field 'guest.mail'"]);
}

// ---------------------------------------------------------------- values

#[test]
fn string_quoting_and_escapes() {
    assert_eq!(ok("name = 'O''Brien'").binds, vec![text("O'Brien")]);
    assert_eq!(
        ok(r#"name = "say ""hi""""#).binds,
        vec![text(r#"say "hi""#)]
    );
    assert_eq!(ok(r"name = 'O\'Brien'").binds, vec![text("O'Brien")]);
    assert_eq!(ok(r"name = 'a\\b'").binds, vec![text(r"a\b")]);
    assert_eq!(ok(r"name = 'a\nb'").binds, vec![text(r"a\nb")]);
    assert_eq!(ok("name = \"it's\"").binds, vec![text("it's")]);
    assert_eq!(ok("name = ''").binds, vec![text("")]);
    assert_eq!(ok("name = 'Zoë 😀'").binds, vec![text("Zoë 😀")]);
}

#[test]
fn numbers() {
    assert_eq!(ok("people = -3").binds, vec![BindValue::Int(-3)]);
    assert_eq!(ok("people = '3'").binds, vec![BindValue::Int(3)]);
    assert_eq!(ok("amount > 2.5").binds, vec![BindValue::Float(2.5)]);
    assert_eq!(ok("amount > -2").binds, vec![BindValue::Float(-2.0)]);
    assert_eq!(ok("amount > '2.5'").binds, vec![BindValue::Float(2.5)]);
    err_has("people = 2.5", &["whole number"]);
    err_has("people = 'three'", &["whole number"]);
    err_has("people = 99999999999999999999", &["out of range"]);
    err_has("people = 12abc", &["invalid value '12abc'"]);
    err_has("people = true", &["whole number"]);
    err_has("amount = 'NaN'", &["not a number"]);
}

#[test]
fn booleans() {
    assert_eq!(ok("vip = true").binds, vec![BindValue::Int(1)]);
    assert_eq!(ok("vip != FALSE").sql, "(c.vip <> $1)");
    assert_eq!(ok("vip = 'false'").binds, vec![BindValue::Int(0)]);
    err_has("vip > true", &["only = and !="]);
    err_has("vip = 1", &["true or false"]);
    err_has("vip LIKE 'x'", &["LIKE only works on text fields"]);
}

#[test]
fn text_fields_need_quoted_strings() {
    err_has("name = foo", &["unquoted value 'foo'", "name = 'foo'"]);
    err_has("name = 42", &["in quotes"]);
    err_has("name LIKE 42", &["quoted text"]);
    err_has(
        "people LIKE '1%'",
        &["LIKE only works on text fields", "whole-number"],
    );
    err_has("name = email", &["unquoted value 'email'"]);
}

#[test]
fn date_fields() {
    compiles("date = 2026-11-21", "(b.date = $1)", &[text("2026-11-21")]);
    assert_eq!(ok("date >= '2026-11-21'").binds, vec![text("2026-11-21")]);
    err_has("date = 2026-11-21T18:30", &["date only"]);
    err_has("date = '2026-11-21T18:30:00Z'", &["date only"]);
    err_has("date = 2026-02-30", &["invalid value '2026-02-30'"]);
    err_has("date = 'tomorrow'", &["not a date"]);
}

#[test]
fn time_fields() {
    assert_eq!(ok("time = '18:30'").binds, vec![text("18:30")]);
    assert_eq!(ok("time >= '9:05'").binds, vec![text("09:05")]);
    assert_eq!(ok("time < '18:30:59'").binds, vec![text("18:30")]);
    assert_eq!(ok("time < 18:30").binds, vec![text("18:30")]);
    err_has("time = '25:00'", &["not a time"]);
    err_has("time = 2026-11-21", &["not a time"]);
}

#[test]
fn datetime_values_are_normalised_to_utc() {
    let cases = [
        ("2026-11-21T18:30", "2026-11-21T18:30:00.000Z"),
        ("2026-11-21T18:30:00Z", "2026-11-21T18:30:00.000Z"),
        ("2026-11-21T18:30:00.123+02:00", "2026-11-21T16:30:00.123Z"),
        ("2026-11-21T01:00:00-0300", "2026-11-21T04:00:00.000Z"),
        ("2026-11-21T00:30:00+01:00", "2026-11-20T23:30:00.000Z"),
        ("2026-12-31T23:00:00-05", "2027-01-01T04:00:00.000Z"),
        ("'2026-11-21 18:30:05.5'", "2026-11-21T18:30:05.500Z"),
        (
            "\"2026-11-21t18:30:00.123456789z\"",
            "2026-11-21T18:30:00.123Z",
        ),
    ];
    for (value, want) in cases {
        compiles(
            &format!("createdAt > {value}"),
            "(c.created_at > $1)",
            &[text(want)],
        );
    }
    err_has("createdAt > 2026-11-21T25:00", &["invalid value"]);
    err_has("createdAt > 9999-12-31T23:00:00-05:00", &["out of range"]);
    err_has("createdAt > '18:30'", &["not a date or date-time"]);
}

#[test]
fn date_only_on_datetime_means_whole_utc_day() {
    let d = "2026-11-21T00:00:00.000Z";
    let d1 = "2026-11-22T00:00:00.000Z";
    let cases: [(&str, &str, Vec<&str>); 6] = [
        (
            "=",
            "(c.created_at >= $1 AND c.created_at < $2)",
            vec![d, d1],
        ),
        (
            "!=",
            "(c.created_at < $1 OR c.created_at >= $2)",
            vec![d, d1],
        ),
        (">", "(c.created_at >= $1)", vec![d1]),
        (">=", "(c.created_at >= $1)", vec![d]),
        ("<", "(c.created_at < $1)", vec![d]),
        ("<=", "(c.created_at < $1)", vec![d1]),
    ];
    for (op, sql, binds) in cases {
        let binds: Vec<BindValue> = binds.into_iter().map(text).collect();
        compiles(&format!("createdAt {op} 2026-11-21"), sql, &binds);
    }
    // Quoted dates too, and inside a larger expression the range keeps its parentheses.
    compiles(
        "people > 1 AND createdAt = '2026-12-31'",
        "(b.people > $1 AND (c.created_at >= $2 AND c.created_at < $3))",
        &[
            BindValue::Int(1),
            text("2026-12-31T00:00:00.000Z"),
            text("2027-01-01T00:00:00.000Z"),
        ],
    );
    err_has(
        "createdAt LIKE 2026-11-21",
        &["LIKE only works on text fields"],
    );
}

// ---------------------------------------------------------------- errors

#[test]
fn unknown_field_lists_allowed_fields() {
    let e = err_has(
        "unknownField = 1",
        &[
            "unknown field 'unknownField'",
            "bookingCount",
            "guest.email",
        ],
    );
    assert_eq!(e.position, Some(0));
    assert_eq!(e.allowed_fields, RES.field_names());
    let e = err_has("people > 1 AND Email = 'x'", &["did you mean 'email'"]);
    assert_eq!(e.position, Some(15));
}

#[test]
fn injection_attempts_are_rejected() {
    let e = err_has(
        "1=1; DROP TABLE customers",
        &[
            "expected a field name at position 0, found '1'",
            "field op value",
        ],
    );
    assert_eq!(e.position, Some(0));
    let e = err_has(
        "name = 'x'; DROP TABLE customers; --",
        &["';' at position 10"],
    );
    assert_eq!(e.position, Some(10));
    let e = err_has("name = 'unterminated", &["unterminated", "position 7"]);
    assert_eq!(e.position, Some(7));
    err_has(
        "name = 'a' OR 1=1",
        &["expected a field name at position 14, found '1'"],
    );
    err_has("lower(name) = 'x'", &["function calls like 'lower(...)'"]);
    err_has("name = \"x\" /* */", &["comments"]);
    err_has("name = 'x' -- comment", &["comments"]);
    err_has(
        "name = 'x' OR 'a' = 'a'",
        &["expected a field name", "found ''a''"],
    );
    err_has(
        "name = 'x' UNION SELECT password FROM users",
        &["expected AND, OR, ',' or the end", "'UNION'"],
    );
    err_has("name = 'x' # comment", &["unexpected character '#'"]);
    err_has("name == 'x'", &["'=='"]);
    err_has("name = 'x' && people > 1", &["write AND"]);
    err_has("name = 'x' || people > 1", &["write OR"]);
    err_has("c.name = 'x'", &["unknown field 'c.name'"]);
}

#[test]
fn syntax_errors_say_what_was_expected() {
    err_has(
        "name = 'x' AND",
        &["expected a field name at position 14, found the end of the filter"],
    );
    err_has("name =", &["expected a value after '=' at position 6"]);
    err_has(
        "name",
        &["expected an operator after field 'name' at position 4"],
    );
    err_has("name 'x'", &["expected an operator"]);
    err_has("(name = 'x'", &["missing ')'", "position 0"]);
    err_has("name = 'x')", &["unexpected ')' at position 10"]);
    err_has(
        "(name = 'x' people = 1)",
        &["expected AND, OR, ',' or ')' at position 12"],
    );
    err_has("()", &["expected a field name at position 1, found ')'"]);
    err_has("name = 'x',", &["expected a field name"]);
    err_has(
        "AND name = 'x'",
        &["expected a field name at position 0, found 'AND'"],
    );
    err_has("name NOT LIKE 'x'", &["expected an operator"]);
    err_has("name = 'x' name = 'y'", &["expected AND, OR"]);
    err_has("people > -", &["unexpected character '-'"]);
}

#[test]
fn limits() {
    let deep = format!("{}people = 1{}", "(".repeat(17), ")".repeat(17));
    let e = err_has(&deep, &["nested too deeply", "16"]);
    assert_eq!(e.position, Some(16));
    let ok16 = format!("{}people = 1{}", "(".repeat(16), ")".repeat(16));
    assert_eq!(ok(&ok16).sql, "(b.people = $1)");
    // Far deeper than the limit must not overflow the stack either.
    err_has(&"(".repeat(1900), &["nested too deeply"]);

    let conds = |n: usize| vec!["people = 1"; n].join(" AND ");
    assert_eq!(ok(&conds(64)).binds.len(), 64);
    err_has(&conds(65), &["too many conditions", "64"]);

    let long = format!("name = '{}'", "x".repeat(2001 - 9));
    assert_eq!(long.chars().count(), 2001);
    let e = err_has(&long, &["too long", "2000"]);
    assert_eq!(e.position, Some(2000));
    let fits = format!("name = '{}'", "é".repeat(2000 - 9));
    assert_eq!(ok(&fits).binds.len(), 1);
    err_has(&" ".repeat(2001), &["too long"]);
}

// ---------------------------------------------------------------- AST / printing

#[test]
fn parse_builds_the_ast() {
    let e = parse("a = 1 OR b = 2 AND c IS NULL").unwrap();
    let Expr::Or(items) = &e else { panic!("{e:?}") };
    assert_eq!(items.len(), 2);
    assert!(matches!(&items[1], Expr::And(v) if v.len() == 2));
    let Expr::Cond(c) = &items[0] else { panic!() };
    assert_eq!(c.field, "a");
    assert_eq!(
        c.pred,
        Predicate::Compare {
            op: Op::Eq,
            value: Literal::Int(1),
            value_pos: 4
        }
    );
    assert_eq!(e.to_query_string(), "a = 1 OR b = 2 AND c IS NULL");
    assert_eq!(
        parse("(a = 1 OR b = 2), c = 3").unwrap().to_string(),
        "(a = 1 OR b = 2) AND c = 3"
    );
}

#[test]
fn literals_print_back() {
    let e = parse(r#"name = "O'B\\r" AND amount = 3.0 AND createdAt > 2026-11-21T18:30:00.5+02:00 AND time = 09:00"#)
        .unwrap();
    assert_eq!(
        e.to_string(),
        r"name = 'O''B\\r' AND amount = 3.0 AND createdAt > 2026-11-21T18:30:00.500+02:00 AND time = 09:00"
    );
}

// ---------------------------------------------------------------- sort

#[test]
fn sort_parsing() {
    let asc = |column| SortKey {
        column,
        dir: SortDir::Asc,
    };
    let desc = |column| SortKey {
        column,
        dir: SortDir::Desc,
    };
    assert_eq!(parse_sort("name:asc", &RES).unwrap(), vec![asc("c.name")]);
    assert_eq!(parse_sort("name", &RES).unwrap(), vec![asc("c.name")]);
    assert_eq!(
        parse_sort("createdAt:-1", &RES).unwrap(),
        vec![desc("c.created_at")]
    );
    assert_eq!(
        parse_sort("name:1,createdAt:desc", &RES).unwrap(),
        vec![asc("c.name"), desc("c.created_at")]
    );
    assert_eq!(
        parse_sort(" guest.email : DESC , people:ASC ", &RES).unwrap(),
        vec![desc("g.email"), asc("b.people")]
    );
    assert_eq!(parse_sort("", &RES).unwrap(), vec![]);
    assert_eq!(parse_sort("  ", &RES).unwrap(), vec![]);

    assert_eq!(desc("c.name").to_sql(), "c.name DESC NULLS LAST");
    assert_eq!(asc("c.name").to_sql(), "c.name ASC NULLS LAST");
    assert_eq!(
        order_by(
            &parse_sort("name:1,createdAt:desc", &RES).unwrap(),
            "c.id ASC"
        ),
        "ORDER BY c.name ASC NULLS LAST, c.created_at DESC NULLS LAST, c.id ASC"
    );
    assert_eq!(order_by(&[], "c.id ASC"), "ORDER BY c.id ASC");
    assert_eq!(order_by(&[], ""), "");
}

#[test]
fn sort_errors() {
    let e = parse_sort("name:asc,nope:desc", &RES).unwrap_err();
    assert!(e.message.contains("unknown field 'nope'"), "{}", e.message);
    assert_eq!(e.position, Some(9));
    assert_eq!(e.allowed_fields, RES.field_names());

    let e = parse_sort("name:up", &RES).unwrap_err();
    assert!(
        e.message.contains("invalid sort direction 'up'"),
        "{}",
        e.message
    );
    assert!(e.message.contains("asc, desc, 1 or -1"), "{}", e.message);
    assert_eq!(e.position, Some(5));
    assert!(parse_sort("name:", &RES).is_err());
    assert!(parse_sort("name:asc:desc", &RES).is_err());
    assert!(
        parse_sort("name,,people", &RES)
            .unwrap_err()
            .message
            .contains("missing field name")
    );
    assert!(parse_sort("name:asc,", &RES).is_err());
    assert!(
        parse_sort("name,name:desc", &RES)
            .unwrap_err()
            .message
            .contains("more than once")
    );
    assert!(parse_sort("name; DROP TABLE x", &RES).is_err());
    assert!(
        parse_sort(&"name,".repeat(401), &RES)
            .unwrap_err()
            .message
            .contains("too long")
    );
}

// ---------------------------------------------------------------- properties

/// Removes source positions so parsed and built ASTs compare equal.
fn strip(e: Expr) -> Expr {
    match e {
        Expr::And(v) => Expr::And(v.into_iter().map(strip).collect()),
        Expr::Or(v) => Expr::Or(v.into_iter().map(strip).collect()),
        Expr::Cond(mut c) => {
            c.pos = 0;
            if let Predicate::Compare { value_pos, .. } = &mut c.pred {
                *value_pos = 0;
            }
            Expr::Cond(c)
        }
    }
}

fn fields_of(ty: FieldType) -> Vec<&'static str> {
    FIELDS
        .iter()
        .filter(|f| f.ty == ty)
        .map(|f| f.name)
        .collect()
}

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(any::<char>(), 0..12).prop_map(String::from_iter),
        "[a-z '\"\\\\;%_*/-]{0,12}",
        Just("'; DROP TABLE customers; --".to_string()),
        Just("\" OR 1=1 /*".to_string()),
        Just("\\'".to_string()),
        Just("O''Brien\\".to_string()),
    ]
}

fn arb_date() -> impl Strategy<Value = NaiveDate> {
    (1900i32..2100, 1u32..=12, 1u32..=28)
        .prop_map(|(y, m, d)| NaiveDate::from_ymd_opt(y, m, d).unwrap())
}

fn arb_time() -> impl Strategy<Value = NaiveTime> {
    (0u32..24, 0u32..60, prop_oneof![Just(0u32), 0u32..60])
        .prop_map(|(h, m, s)| NaiveTime::from_hms_opt(h, m, s).unwrap())
}

fn arb_datetime() -> impl Strategy<Value = Literal> {
    let nanos = prop_oneof![
        Just(0u32),
        (0u32..1000).prop_map(|ms| ms * 1_000_000),
        0u32..1_000_000_000
    ];
    (arb_date(), arb_time(), nanos, -14 * 60..=14 * 60i32).prop_map(|(d, t, n, off)| {
        let naive = d.and_time(t) + chrono::Duration::nanoseconds(i64::from(n));
        let off = FixedOffset::east_opt(off * 60).unwrap();
        Literal::DateTime(off.from_local_datetime(&naive).unwrap())
    })
}

fn cmp_op() -> impl Strategy<Value = Op> {
    prop::sample::select(vec![Op::Eq, Op::Ne, Op::Gt, Op::Ge, Op::Lt, Op::Le])
}

fn compare(field: &'static str, op: Op, value: Literal) -> Condition {
    Condition {
        field: field.to_string(),
        pos: 0,
        pred: Predicate::Compare {
            op,
            value,
            value_pos: 0,
        },
    }
}

/// Conditions that type-check against `RES`; text values come from `text`.
fn arb_typed_cond(text: BoxedStrategy<String>) -> impl Strategy<Value = Condition> {
    let all_ops = prop::sample::select(vec![
        Op::Eq,
        Op::Ne,
        Op::Gt,
        Op::Ge,
        Op::Lt,
        Op::Le,
        Op::Like,
    ]);
    let sel = |ty| prop::sample::select(fields_of(ty));
    prop_oneof![
        (sel(FieldType::Text), all_ops, text).prop_map(|(f, op, s)| compare(
            f,
            op,
            Literal::Str(s)
        )),
        (sel(FieldType::Integer), cmp_op(), any::<i64>()).prop_map(|(f, op, i)| compare(
            f,
            op,
            Literal::Int(i)
        )),
        (sel(FieldType::Float), cmp_op(), -1.0e15..1.0e15f64).prop_map(|(f, op, x)| compare(
            f,
            op,
            Literal::Float(x)
        )),
        (
            sel(FieldType::Boolean),
            prop::sample::select(vec![Op::Eq, Op::Ne]),
            any::<bool>()
        )
            .prop_map(|(f, op, b)| compare(f, op, Literal::Bool(b))),
        (sel(FieldType::Date), cmp_op(), arb_date()).prop_map(|(f, op, d)| compare(
            f,
            op,
            Literal::Date(d)
        )),
        (sel(FieldType::Time), cmp_op(), arb_time()).prop_map(|(f, op, t)| compare(
            f,
            op,
            Literal::Time(t)
        )),
        (
            sel(FieldType::DateTime),
            cmp_op(),
            prop_oneof![arb_datetime(), arb_date().prop_map(Literal::Date)]
        )
            .prop_map(|(f, op, v)| compare(f, op, v)),
        (prop::sample::select(RES.field_names()), any::<bool>()).prop_map(|(f, not)| Condition {
            field: f.to_string(),
            pos: 0,
            pred: if not {
                Predicate::IsNotNull
            } else {
                Predicate::IsNull
            },
        }),
    ]
}

/// Valid ASTs (within the parser's limits) built from `cond`.
fn arb_expr(cond: impl Strategy<Value = Condition> + 'static) -> impl Strategy<Value = Expr> {
    cond.prop_map(Expr::Cond).prop_recursive(3, 40, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 2..=4).prop_map(Expr::and),
            proptest::collection::vec(inner, 2..=4).prop_map(Expr::or),
        ]
    })
}

fn typed_expr() -> impl Strategy<Value = Expr> {
    arb_expr(arb_typed_cond(arb_text().boxed()))
}

/// Any literal on any field name (not type-checked): exercises the parser alone.
fn untyped_expr() -> impl Strategy<Value = Expr> {
    let lit = prop_oneof![
        arb_text().prop_map(Literal::Str),
        any::<i64>().prop_map(Literal::Int),
        (-1.0e300..1.0e300f64).prop_map(Literal::Float),
        any::<bool>().prop_map(Literal::Bool),
        arb_date().prop_map(Literal::Date),
        arb_time().prop_map(Literal::Time),
        arb_datetime(),
    ];
    let field = "[A-Za-z_][A-Za-z0-9_]{0,6}(\\.[A-Za-z_][A-Za-z0-9_]{0,4}){0,2}".prop_filter(
        "not a keyword",
        |f| {
            !["and", "or", "like", "is", "not", "null", "true", "false"]
                .contains(&f.to_lowercase().as_str())
        },
    );
    let ops = prop::sample::select(vec![
        Op::Eq,
        Op::Ne,
        Op::Gt,
        Op::Ge,
        Op::Lt,
        Op::Le,
        Op::Like,
    ]);
    arb_expr((field, ops, lit).prop_map(|(field, op, value)| Condition {
        field,
        pos: 0,
        pred: Predicate::Compare {
            op,
            value,
            value_pos: 0,
        },
    }))
}

fn count_conditions(e: &Expr) -> usize {
    match e {
        Expr::Cond(_) => 1,
        Expr::And(v) | Expr::Or(v) => v.iter().map(count_conditions).sum(),
    }
}

/// Inputs mixing filter syntax, injection fragments and noise; some compile, most don't.
fn token_soup() -> impl Strategy<Value = String> {
    let vocab = prop::sample::select(vec![
        "name",
        "email",
        "guest.email",
        "_id",
        "people",
        "amount",
        "vip",
        "date",
        "time",
        "createdAt",
        "a",
        "c.name",
        "unknown",
        "lower",
        "=",
        "!=",
        "<>",
        ">",
        ">=",
        "<",
        "<=",
        "==",
        "LIKE",
        "like",
        "AND",
        "and",
        "OR",
        "IS",
        "NOT",
        "NULL",
        "TRUE",
        "false",
        "(",
        ")",
        ",",
        ";",
        "--",
        "/*",
        "*/",
        "'x'",
        "'%a%'",
        "\"y\"",
        "'O''B'",
        "'",
        "\"",
        "1",
        "-2",
        "2.5",
        "1=1",
        "'3'",
        "2026-11-21",
        "2026-11-21T18:30:00Z",
        "'18:30'",
        "18:30",
        "DROP",
        "TABLE",
        "$1",
        "?",
        "\\",
        "'true'",
    ]);
    proptest::collection::vec(vocab, 0..14).prop_map(|v| v.join(" "))
}

/// Checks that `sql` consists only of whitelisted columns, fixed keywords and operators,
/// parentheses, whitespace and `$n` placeholders numbered from `first` up, one per bind.
fn check_sql(sql: &str, first: usize, nbinds: usize) -> Result<(), TestCaseError> {
    let columns: Vec<&str> = FIELDS.iter().map(|f| f.column).collect();
    let keywords = ["AND", "OR", "LIKE", "LOWER", "IS", "NOT", "NULL", "ESCAPE"];
    let ops = ["=", "<>", ">", ">=", "<", "<="];
    let chars: Vec<char> = sql.chars().collect();
    let mut placeholders = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        i += 1;
        match c {
            ' ' | '(' | ')' => {}
            // The one literal the compiler writes: LIKE's escape character, `'\'`.
            '\'' => {
                prop_assert!(
                    chars.get(i) == Some(&'\\') && chars.get(i + 1) == Some(&'\''),
                    "quote in {sql}"
                );
                i += 2;
            }
            '$' => {
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
                let n: String = chars[start + 1..i].iter().collect();
                prop_assert!(!n.is_empty(), "bare $ in {sql}");
                placeholders.push(n.parse::<usize>().unwrap());
            }
            '<' | '>' | '=' => {
                while i < chars.len() && matches!(chars[i], '<' | '>' | '=') {
                    i += 1;
                }
                let op: String = chars[start..i].iter().collect();
                prop_assert!(ops.contains(&op.as_str()), "operator {op:?} in {sql}");
            }
            c if c.is_ascii_alphanumeric() || c == '_' || c == '.' => {
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | '.'))
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                prop_assert!(
                    columns.contains(&word.as_str()) || keywords.contains(&word.as_str()),
                    "word {word:?} in {sql}"
                );
            }
            c => prop_assert!(false, "character {c:?} in {sql}"),
        }
    }
    let expected: Vec<usize> = (first..first + nbinds).collect();
    prop_assert_eq!(placeholders, expected, "placeholders in {}", sql);
    Ok(())
}

/// Text-field string values of `e`, in order, as bound (LIKE patterns with their
/// backslashes made unambiguous).
fn text_values(e: &Expr, out: &mut Vec<String>) {
    match e {
        Expr::And(v) | Expr::Or(v) => v.iter().for_each(|x| text_values(x, out)),
        Expr::Cond(c) => {
            if let Predicate::Compare {
                op,
                value: Literal::Str(s),
                ..
            } = &c.pred
                && RES.field(&c.field).is_some_and(|f| f.ty == FieldType::Text)
            {
                out.push(if *op == Op::Like {
                    compile::like_pattern(s)
                } else {
                    s.clone()
                });
            }
        }
    }
}

/// True when every backslash of `pattern` escapes `%`, `_` or a backslash: the only
/// form PostgreSQL and SQLite read alike under `ESCAPE '\'`.
fn unambiguous_like(pattern: &str) -> bool {
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == '\\' && !matches!(chars.next(), Some('%' | '_' | '\\')) {
            return false;
        }
    }
    true
}

#[test]
fn like_backslashes_are_literal_unless_they_escape() {
    for (query, bound) in [
        // A trailing backslash: a 500 on PostgreSQL before, a literal backslash now.
        (r"name LIKE 'abc\\'", r"abc\\"),
        (r"name LIKE '\\'", r"\\"),
        (r"name LIKE 'a\\\\'", r"a\\"),
        (r"name LIKE '%\%'", r"%\%"),
        (r"name LIKE '\_%'", r"\_%"),
        (r"name LIKE 'C:\dir'", r"C:\\dir"),
        (r#"name LIKE "x\\""#, r"x\\"),
        ("name LIKE 'plain%'", "plain%"),
    ] {
        let f = ok(query);
        assert_eq!(f.binds, vec![text(bound)], "{query}");
        assert!(f.sql.ends_with("ESCAPE '\\')"), "{}", f.sql);
    }
    // `\'` escapes the quote, so these never close: a clear 400, not a 500.
    for query in [r"name LIKE 'abc\'", r"name LIKE '\'"] {
        err_has(
            query,
            &[
                "unterminated text value",
                "write \\\\ for a backslash at the end",
            ],
        );
    }
    err_has("name LIKE 42", &["\\% or \\_ for a literal % or _"]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn prop_never_panics_on_arbitrary_strings(s in any::<String>()) {
        let _ = compile_filter(&s, &RES, 1);
        let _ = parse_sort(&s, &RES);
    }

    #[test]
    fn prop_never_panics_on_filter_like_strings(s in "[a-zA-Z0-9_ .'\"()=<>!,;:+\\\\*/%$#-]{0,80}") {
        let _ = compile_filter(&s, &RES, 1);
        let _ = parse_sort(&s, &RES);
    }

    #[test]
    fn prop_round_trip_typed(e in typed_expr(), first in 1usize..10) {
        prop_assume!(count_conditions(&e) <= MAX_CONDITIONS);
        let text = e.to_query_string();
        let parsed = parse(&text).map_err(|err| TestCaseError::fail(format!("{text:?}: {}", err.message)))?;
        prop_assert_eq!(&strip(parsed), &e, "text {:?}", text);
        // Every generated AST type-checks, and the SQL is well-formed.
        let f = compile_filter(&text, &RES, first)
            .map_err(|err| TestCaseError::fail(format!("{text:?}: {}", err.message)))?
            .unwrap();
        check_sql(&f.sql, first, f.binds.len())?;
    }

    #[test]
    fn prop_round_trip_untyped(e in untyped_expr()) {
        prop_assume!(count_conditions(&e) <= MAX_CONDITIONS);
        let text = e.to_query_string();
        prop_assume!(text.chars().count() <= MAX_INPUT_CHARS);
        let parsed = parse(&text).map_err(|err| TestCaseError::fail(format!("{text:?}: {}", err.message)))?;
        prop_assert_eq!(&strip(parsed), &e, "text {:?}", text);
    }

    #[test]
    fn prop_compiled_sql_is_only_whitelisted_tokens(s in prop_oneof![token_soup(), typed_expr().prop_map(|e| e.to_string())], first in 1usize..100) {
        if let Ok(Some(f)) = compile_filter(&s, &RES, first) {
            check_sql(&f.sql, first, f.binds.len())?;
        }
    }

    #[test]
    fn prop_like_patterns_are_unambiguous(s in "[a-z%_\\\\]{0,12}") {
        let pattern = compile::like_pattern(&s);
        prop_assert!(unambiguous_like(&pattern), "{s:?} became {pattern:?}");
        // What was already unambiguous is left as the client wrote it.
        if unambiguous_like(&s) {
            prop_assert_eq!(&pattern, &s);
        }
    }

    #[test]
    fn prop_strings_only_reach_binds(e in arb_expr(arb_typed_cond("«[^«]{0,10}".boxed()))) {
        prop_assume!(count_conditions(&e) <= MAX_CONDITIONS);
        let f = compile(&e, &RES, 1).unwrap();
        prop_assert!(!f.sql.contains('«'), "string value in {}", f.sql);
        prop_assert!(f.sql.is_ascii());
        let mut values = Vec::new();
        text_values(&e, &mut values);
        let bound: Vec<String> = f.binds.iter().filter_map(|b| match b {
            BindValue::Text(s) if s.starts_with('«') => Some(s.clone()),
            _ => None,
        }).collect();
        prop_assert_eq!(bound, values);
    }
}
