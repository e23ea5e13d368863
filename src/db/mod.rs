//! The database handle shared by every role: sqlx `Any` pools over SQLite (the
//! default) or PostgreSQL, so every query is written once, in the SQL both accept.
//!
//! The rule: a statement that writes runs on [`Db::writes`] (or in a transaction from
//! [`Db::begin_write`]); one that only reads runs on [`Db::pool`]. With SQLite the
//! writes pool is a single connection. SQLite lets one connection write at a time, and
//! a second one that tries is put to sleep by SQLite's busy handler for 1 ms, then 2, 5,
//! 10... before it tries again; the profile of the first token found that sleep on
//! nearly every question, where the question's row and the answer's first event were
//! written at once. Waiting for the one writer connection in the pool instead wakes the
//! next writer the moment the last one is done, and keeps that connection's page cache
//! warm across writes.

mod clock;
pub mod files;

pub use clock::{canonical, canonical_now, parse_canonical};

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::pool::PoolConnection;
use sqlx::{Acquire, Any, AnyPool, Connection, Executor, Transaction};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbKind {
    Sqlite,
    Postgres,
}

#[derive(Clone)]
pub struct Db {
    pool: AnyPool,
    /// SQLite: one connection, every writer's turn in order; PostgreSQL: `pool`.
    writes: AnyPool,
    kind: DbKind,
}

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

impl Db {
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        sqlx::any::install_default_drivers();
        let kind = if url.starts_with("sqlite:") {
            DbKind::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            DbKind::Postgres
        } else {
            anyhow::bail!("DATABASE_URL must start with sqlite: or postgres:");
        };
        let url = if kind == DbKind::Sqlite {
            prepare_sqlite_file(url)?;
            create_if_missing(url)
        } else {
            url.to_owned()
        };
        let options = AnyConnectOptions::from_str(&url).context("parsing DATABASE_URL")?;
        let connect = |max_connections: u32| {
            pool_options(kind, max_connections).connect_with(options.clone())
        };
        let context = || format!("connecting to the {kind:?} database");
        let (pool, writes) = match kind {
            DbKind::Sqlite => {
                // The writer first: it turns on WAL, which the readers then find.
                let writes = connect(1).await.with_context(context)?;
                // Each connection to `:memory:` is a database of its own: one for all.
                let pool = match in_memory(&url) {
                    true => writes.clone(),
                    false => connect(8).await.with_context(context)?,
                };
                (pool, writes)
            }
            DbKind::Postgres => {
                let pool = connect(16).await.with_context(context)?;
                (pool.clone(), pool)
            }
        };
        Ok(Self { pool, writes, kind })
    }

    pub async fn migrate(&self) -> anyhow::Result<()> {
        let migrator = match self.kind {
            DbKind::Sqlite => &SQLITE_MIGRATIONS,
            DbKind::Postgres => &POSTGRES_MIGRATIONS,
        };
        migrator
            .run(&self.writes)
            .await
            .context("applying database migrations")?;
        Ok(())
    }

    /// For statements that only read.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// For statements that write: see the rule at the top of this module.
    pub fn writes(&self) -> &AnyPool {
        &self.writes
    }

    pub fn kind(&self) -> DbKind {
        self.kind
    }

    /// A transaction that intends to write. SQLite takes the write lock up front
    /// (`BEGIN IMMEDIATE`), so a read-then-write transaction waits for other writers
    /// instead of failing with SQLITE_BUSY when it upgrades.
    pub async fn begin_write(&self) -> Result<Transaction<'static, Any>, sqlx::Error> {
        match self.kind {
            DbKind::Sqlite => self.writes.begin_with("BEGIN IMMEDIATE").await,
            DbKind::Postgres => self.writes.begin().await,
        }
    }

    /// [`Db::begin_write`] on a connection the caller holds.
    pub async fn begin_write_on<'c>(
        &self,
        conn: &'c mut PoolConnection<Any>,
    ) -> Result<Transaction<'c, Any>, sqlx::Error> {
        match self.kind {
            DbKind::Sqlite => conn.begin_with("BEGIN IMMEDIATE").await,
            DbKind::Postgres => conn.begin().await,
        }
    }

    pub async fn ping(&self) -> Result<(), sqlx::Error> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map(|_| ())
    }

    pub async fn close(&self) {
        self.pool.close().await;
        self.writes.close().await;
    }
}

/// A pool's settings: how many connections, and for SQLite how each starts.
fn pool_options(kind: DbKind, max_connections: u32) -> AnyPoolOptions {
    let options = AnyPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10));
    if kind == DbKind::Postgres {
        return options;
    }
    // WAL lets readers run beside the single writer; NORMAL sync is durable in WAL.
    // A file connection does not go stale, so it is not pinged before each use: the
    // ping is a round trip to the connection's worker thread, as costly as a small
    // query, and the profile showed it on every event written.
    options.test_before_acquire(false).after_connect(|conn, _meta| {
        Box::pin(async move {
            conn.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 10000;")
                .await?;
            Ok(())
        })
    })
}

/// True when the error is a unique or primary-key violation.
pub fn is_unique_violation(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .is_some_and(|e| e.is_unique_violation())
}

/// A new SQLite file is created unless the URL says otherwise (`mode=ro`, `mode=rw`).
fn create_if_missing(url: &str) -> String {
    if url.contains("mode=") {
        url.to_owned()
    } else if url.contains('?') {
        format!("{url}&mode=rwc")
    } else {
        format!("{url}?mode=rwc")
    }
}

/// Makes the database's directory and file private before SQLite opens it: SQLite
/// creates its `-wal` and `-shm` files with the database file's mode, so they are
/// private too. Existing wider ones are reported.
/// A SQLite URL's file path and its options.
fn sqlite_path(url: &str) -> (&str, &str) {
    let path = url
        .trim_start_matches("sqlite://")
        .trim_start_matches("sqlite:");
    path.split_once('?').unwrap_or((path, ""))
}

fn in_memory(url: &str) -> bool {
    let (path, options) = sqlite_path(url);
    path.is_empty() || path == ":memory:" || options.contains("mode=memory")
}

fn prepare_sqlite_file(url: &str) -> anyhow::Result<()> {
    if in_memory(url) {
        return Ok(());
    }
    let (path, options) = sqlite_path(url);
    let path = std::path::Path::new(path);
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent {
        files::create_private_dir(parent)
            .with_context(|| format!("creating the data directory {}", parent.display()))?;
    }
    // Only where SQLite would create it anyway (see `create_if_missing`).
    if !options.contains("mode=") || options.contains("mode=rwc") {
        files::create_private_file(path)
            .with_context(|| format!("creating the database file {}", path.display()))?;
    }
    let wal = sidecar(path, "-wal");
    let shm = sidecar(path, "-shm");
    let mut paths = vec![path, wal.as_path(), shm.as_path()];
    paths.extend(parent);
    files::warn_if_shared(&paths);
    Ok(())
}

/// `maitred.db` → `maitred.db-wal`.
fn sidecar(path: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}
