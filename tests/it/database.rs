//! The database handle: writes take turns on the writer connection, reads run beside
//! them, and nothing written is lost or seen half-done (SQLite; with PostgreSQL both
//! are one pool).

use maitred::db::Db;

use crate::helpers::Database;

#[tokio::test]
async fn a_sqlite_database_in_memory_is_one_database_for_its_readers_and_its_writer() {
    let db = Db::connect("sqlite::memory:").await.expect("connect");
    db.migrate().await.expect("migrate");
    sqlx::query("INSERT INTO conversations (id, owner, title, created_at, updated_at) VALUES ('c1', 'ann', 'hello', 'now', 'now')")
        .execute(db.writes())
        .await
        .expect("write");
    let (title,): (String,) = sqlx::query_as("SELECT title FROM conversations WHERE id = 'c1'")
        .fetch_one(db.pool())
        .await
        .expect("a reader sees what the writer wrote");
    assert_eq!(title, "hello");
}

/// Many writers at once, some in read-then-write transactions, some single
/// statements, with readers beside them: every write lands, no transaction sees
/// another's half-done work, and none waits on the other for ever. (SQLite only:
/// PostgreSQL's writers run at once, and its read-then-write callers lock rows.)
async fn writers_take_turns(db: Db) {
    sqlx::query("DROP TABLE IF EXISTS turn_counter")
        .execute(db.writes())
        .await
        .expect("drop");
    sqlx::query("CREATE TABLE turn_counter (id TEXT PRIMARY KEY, n BIGINT NOT NULL)")
        .execute(db.writes())
        .await
        .expect("create");
    sqlx::query("INSERT INTO turn_counter (id, n) VALUES ('all', 0)")
        .execute(db.writes())
        .await
        .expect("seed");
    let writers = (0..60).map(|i| {
        let db = db.clone();
        tokio::spawn(async move {
            if i % 2 == 0 {
                let mut tx = db.begin_write().await.expect("begin");
                let (n,): (i64,) = sqlx::query_as("SELECT n FROM turn_counter WHERE id = 'all'")
                    .fetch_one(&mut *tx)
                    .await
                    .expect("read in the transaction");
                tokio::task::yield_now().await;
                sqlx::query("UPDATE turn_counter SET n = $1 WHERE id = 'all'")
                    .bind(n + 1)
                    .execute(&mut *tx)
                    .await
                    .expect("update");
                tx.commit().await.expect("commit");
            } else {
                sqlx::query("INSERT INTO turn_counter (id, n) VALUES ($1, 1)")
                    .bind(format!("row {i}"))
                    .execute(db.writes())
                    .await
                    .expect("insert");
            }
            let _: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM turn_counter")
                .fetch_one(db.pool())
                .await
                .expect("read beside the writers");
        })
    });
    for writer in futures::future::join_all(writers).await {
        writer.expect("a writer panicked");
    }
    let (counted,): (i64,) = sqlx::query_as("SELECT n FROM turn_counter WHERE id = 'all'")
        .fetch_one(db.pool())
        .await
        .expect("count");
    let (rows,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM turn_counter WHERE id <> 'all'")
        .fetch_one(db.pool())
        .await
        .expect("rows");
    assert_eq!((counted, rows), (30, 30), "every write landed exactly once");
    sqlx::query("DROP TABLE turn_counter")
        .execute(db.writes())
        .await
        .expect("drop");
}

#[tokio::test]
async fn writers_take_turns_on_sqlite() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = Database::Sqlite.url(dir.path()).await;
    writers_take_turns(Db::connect(&url).await.expect("connect")).await;
}
