//! Attacks on the identity provider, token checks, local state and the query
//! filter (security issue #10), each performed over real HTTP and shown to fail.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::helpers::{Database, TestApp};
use crate::on_both_databases;

// ------------------------------------------------------------------ #9

/// Finding #9: the data directory was 0755 and the SQLite files 0644, while they
/// hold the signing key, refresh tokens, conversations and the dev passwords.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_state_is_private_to_the_service_user() {
    use std::os::unix::fs::PermissionsExt;

    let mut data_dir = None;
    let app = TestApp::spawn_with(&Database::Sqlite, |s| {
        // A data directory that does not exist yet, as on a first start.
        let fresh = s.data_dir.join("fresh").join("state");
        s.database_url = maitred::config::sqlite_url(&fresh.join("maitred.db"));
        s.data_dir = fresh.clone();
        data_dir = Some(fresh);
    })
    .await;
    let data_dir = data_dir.unwrap();
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data_dir), 0o700, "{}", data_dir.display());
    assert_eq!(
        mode(data_dir.parent().unwrap()),
        0o700,
        "created parents too"
    );
    let mut files = BTreeSet::new();
    for entry in std::fs::read_dir(&data_dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(mode(&path), 0o600, "{name} is readable by others");
        files.insert(name);
    }
    for expected in [
        "maitred.db",
        "maitred.db-wal",
        "maitred.db-shm",
        "dev-credentials.json",
    ] {
        assert!(
            files.contains(expected),
            "{expected} missing from {files:?}"
        );
    }
    app.stop().await;
}

// ------------------------------------------------------------------ #14

/// Names of the customers the LIKE tests look for (after the common prefix).
const LIKE_NAMES: &[&str] = &[
    r"abc\", r"a\b", r"a\\b", "100%", "100x", "a_b", "axb", r"\", r"\%", "%", "_", "ab", r"b\",
];
const PREFIX: &str = "LikeTest ";

/// The documented LIKE rule, as a reference: `%` any run, `_` one character, `\%`
/// `\_` `\\` the character itself, any other backslash a literal backslash;
/// case-insensitive (ASCII).
fn reference_like(pattern: &str, text: &str) -> bool {
    enum Token {
        Any,
        One,
        Char(char),
    }
    let mut tokens = Vec::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        tokens.push(match c {
            '%' => Token::Any,
            '_' => Token::One,
            '\\' => match chars.peek() {
                Some(&next @ ('%' | '_' | '\\')) => {
                    chars.next();
                    Token::Char(next)
                }
                _ => Token::Char('\\'),
            },
            c => Token::Char(c),
        });
    }
    fn matches(tokens: &[Token], text: &[char]) -> bool {
        match tokens.split_first() {
            None => text.is_empty(),
            Some((Token::Any, rest)) => (0..=text.len()).any(|i| matches(rest, &text[i..])),
            Some((Token::One, rest)) => !text.is_empty() && matches(rest, &text[1..]),
            Some((Token::Char(c), rest)) => text
                .first()
                .is_some_and(|t| t.eq_ignore_ascii_case(c) && matches(rest, &text[1..])),
        }
    }
    let text: Vec<char> = text.chars().collect();
    matches(&tokens, &text)
}

/// A LIKE pattern written as quoted text in a `customQuery`.
fn quoted(value: &str) -> String {
    format!("'{}'", value.replace('\\', r"\\").replace('\'', "''"))
}

/// Finding #14: on PostgreSQL a LIKE pattern ending in a backslash was a 500.
async fn like_patterns_with_backslashes_never_fail(database: &Database) {
    let app = TestApp::spawn(database).await;
    let token = app.backend_token().await;
    for (n, name) in LIKE_NAMES.iter().enumerate() {
        sqlx::query(
            "INSERT INTO customers (id, name, created_at, booking_count, total_spent) VALUES ($1, $2, $3, 0, 0)",
        )
        .bind(format!("like-test-{n}"))
        .bind(format!("{PREFIX}{name}"))
        .bind("2026-01-01T00:00:00.000Z")
        .execute(app.db.pool())
        .await
        .unwrap();
    }
    let search = |filter: String| {
        let app = &app;
        let token = &token;
        async move {
            let response = app
                .http
                .get(format!("{}/customers", app.api))
                .query(&[(
                    "customQuery",
                    format!("name LIKE 'liketest %' AND ({filter})"),
                )])
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap();
            (status, body)
        }
    };
    let names = |body: &Value| -> BTreeSet<String> {
        body.as_array()
            .unwrap()
            .iter()
            .map(|c| {
                c["name"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches(PREFIX)
                    .to_owned()
            })
            .collect()
    };

    // The finding's patterns, written as a client writes them.
    for (filter, expected) in [
        (r"name LIKE '%abc\\'", vec![r"abc\"]),
        (r"name LIKE '%\\'", vec![r"abc\", r"\", r"b\"]),
        (r"name LIKE 'a\\'", vec![]),
        (r"name LIKE '%\%'", vec!["100%", r"\%", "%"]),
        (r"name LIKE '%a\b'", vec![r"a\b"]),
        (r"name LIKE '%a\\\\b'", vec![r"a\b"]),
        (r"name LIKE '%a\_b'", vec!["a_b"]),
        (r"name LIKE '% \\\\\%'", vec![r"\%"]),
    ] {
        let (status, body) = search(filter.to_owned()).await;
        assert_eq!(status, 200, "{filter}: {body}");
        let expected: BTreeSet<String> = expected.into_iter().map(str::to_owned).collect();
        assert_eq!(names(&body), expected, "{filter}");
    }
    // `\'` escapes the quote: these never close, and say how to write a backslash.
    for filter in [r"name LIKE 'abc\'", r"name LIKE '\'"] {
        let (status, body) = search(filter.to_owned()).await;
        assert_eq!(status, 400, "{filter}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains("for a backslash at the end"), "{message}");
    }

    // Random patterns of the troublesome characters: never a 500, always the rule.
    let alphabet = ['a', 'b', 'x', '\\', '%', '_', '\''];
    let mut seed: u64 = 0x5eed_1234;
    for _ in 0..150 {
        let mut pattern = String::from("%");
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        for k in 0..(seed >> 60) % 6 {
            pattern.push(alphabet[((seed >> (k * 8)) % alphabet.len() as u64) as usize]);
        }
        let (status, body) = search(format!("name LIKE {}", quoted(&pattern))).await;
        assert_eq!(status, 200, "{pattern:?}: {body}");
        let expected: BTreeSet<String> = LIKE_NAMES
            .iter()
            .filter(|name| reference_like(&pattern, &format!("{PREFIX}{name}")))
            .map(|name| (*name).to_owned())
            .collect();
        assert_eq!(names(&body), expected, "pattern {pattern:?}");
    }
    app.stop().await;
}

on_both_databases!(like_patterns_with_backslashes_never_fail,);
