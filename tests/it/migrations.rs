//! The SQLite and PostgreSQL migrations describe one schema: the same tables, the
//! same columns in each, the same indexes. Types differ by dialect and are not
//! compared. Runs when `TEST_DATABASE_URL` names a PostgreSQL server.

use std::collections::BTreeSet;

use maitred::db::Db;

use crate::helpers::Database;

/// `table`, `table.column` and `table index name` lines, sorted.
type Schema = BTreeSet<String>;

async fn sqlite_schema(db: &Db) -> Schema {
    let columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p \
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> '_sqlx_migrations'",
    )
    .fetch_all(db.pool())
    .await
    .expect("read SQLite columns");
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "SELECT tbl_name, name FROM sqlite_master WHERE type = 'index' \
         AND name NOT LIKE 'sqlite_autoindex_%' AND tbl_name <> '_sqlx_migrations'",
    )
    .fetch_all(db.pool())
    .await
    .expect("read SQLite indexes");
    lines(columns, indexes)
}

async fn postgres_schema(db: &Db) -> Schema {
    let columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name <> '_sqlx_migrations'",
    )
    .fetch_all(db.pool())
    .await
    .expect("read PostgreSQL columns");
    // Indexes made by CREATE INDEX, not those behind PRIMARY KEY / UNIQUE constraints
    // (SQLite's equivalents are its autoindexes, left out above).
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "SELECT i.tablename::text, i.indexname::text FROM pg_indexes i \
         WHERE i.schemaname = current_schema() AND i.tablename <> '_sqlx_migrations' \
         AND NOT EXISTS (SELECT 1 FROM pg_constraint c \
             JOIN pg_class x ON x.oid = c.conindid \
             JOIN pg_namespace n ON n.oid = x.relnamespace \
             WHERE x.relname = i.indexname AND n.nspname = i.schemaname)",
    )
    .fetch_all(db.pool())
    .await
    .expect("read PostgreSQL indexes");
    lines(columns, indexes)
}

fn lines(columns: Vec<(String, String)>, indexes: Vec<(String, String)>) -> Schema {
    let mut schema = Schema::new();
    for (table, column) in columns {
        schema.insert(table.clone());
        schema.insert(format!("{table}.{column}"));
    }
    for (table, index) in indexes {
        schema.insert(format!("{table} index {index}"));
    }
    schema
}

async fn migrated(database: &Database, dir: &std::path::Path) -> Db {
    let db = Db::connect(&database.url(dir).await)
        .await
        .expect("connect");
    db.migrate().await.expect("migrate");
    db
}

#[tokio::test]
async fn sqlite_and_postgres_migrations_make_the_same_schema() {
    let Some(postgres) = Database::postgres() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = sqlite_schema(&migrated(&Database::Sqlite, dir.path()).await).await;
    let postgres = postgres_schema(&migrated(&postgres, dir.path()).await).await;
    assert!(!sqlite.is_empty(), "the SQLite schema has no tables");
    let only_sqlite: Vec<&String> = sqlite.difference(&postgres).collect();
    let only_postgres: Vec<&String> = postgres.difference(&sqlite).collect();
    assert!(
        only_sqlite.is_empty() && only_postgres.is_empty(),
        "the migrations have drifted apart\nonly in SQLite: {only_sqlite:#?}\nonly in PostgreSQL: {only_postgres:#?}"
    );
}
