//! The docs name files by path; each named path must exist, so a move or a rename
//! that leaves a doc behind fails here (docs/architecture.md's map of the crates and
//! of the files one question crosses included).

use std::path::{Path, PathBuf};

const DOCS: &[&str] = &[
    "README.md",
    "docs/architecture.md",
    "docs/operations.md",
    "docs/deployment.md",
    "docs/sse-api.md",
    "docs/benchmarks.md",
    "docs/connected-accounts.md",
    "frontend/README.md",
    "frontend/e2e/README.md",
];
const ROOTS: &[&str] = &[
    "crates/",
    "src/",
    "tests/",
    "scripts/",
    "frontend/",
    "deploy/",
    "benches/",
    "docs/",
];

/// `a/{b,c}/d` is `a/b/d` and `a/c/d`.
fn expand(path: &str) -> Vec<String> {
    match (path.find('{'), path.find('}')) {
        (Some(open), Some(close)) if open < close => path[open + 1..close]
            .split(',')
            .flat_map(|choice| expand(&format!("{}{choice}{}", &path[..open], &path[close + 1..])))
            .collect(),
        _ => vec![path.to_owned()],
    }
}

/// The paths a Markdown text names in code spans: `crates/gateway/src/lib.rs`, with
/// any `:line` or `#anchor` cut, and nothing with a wildcard or a placeholder.
fn named_paths(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| ROOTS.iter().any(|root| span.starts_with(root)))
        .filter(|span| !span.contains(['*', '<', ' ', '$', '…']))
        .map(|span| span.split([':', '#']).next().unwrap_or(span).to_owned())
        .flat_map(|span| expand(&span))
        .collect()
}

#[test]
fn every_path_the_docs_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    let mut checked = 0;
    for doc in DOCS {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        // A doc in a folder may name paths from that folder (frontend/README.md: `src/…`).
        let folder = Path::new(doc).parent().unwrap_or(Path::new(""));
        for path in named_paths(&text) {
            // The web UI's build output exists only once it is built.
            if path.starts_with("frontend/dist") {
                continue;
            }
            checked += 1;
            let path = PathBuf::from(&path);
            if !root.join(folder).join(&path).exists() && !root.join(&path).exists() {
                missing.push(format!("{doc}: `{}`", path.display()));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} paths found: is the scan broken?"
    );
    assert!(
        missing.is_empty(),
        "paths named in docs that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_scan_finds_paths_and_expands_braces() {
    let text = "see `crates/core/migrations/{sqlite,postgres}/` and `src/main.rs:12`, not `crates/*` or `cargo test`";
    assert_eq!(
        named_paths(text),
        [
            "crates/core/migrations/sqlite/",
            "crates/core/migrations/postgres/",
            "src/main.rs"
        ]
    );
}
