//! The database handle shared by every role: one sqlx `Any` pool over SQLite (the
//! default) or PostgreSQL, so every query is written once, in the SQL both accept.

mod clock;
pub mod files;

pub use clock::{canonical, canonical_now, parse_canonical};

use std::path::{Path, PathBuf};
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
    kind: DbKind,
    /// The SQLite database's file; `None` for PostgreSQL and in-memory SQLite.
    sqlite_file: Option<PathBuf>,
}

/// Every SQLite connection's settings, the pool's and any held outside it: WAL lets
/// readers run beside the single writer, and NORMAL sync is durable in WAL.
pub const SQLITE_SETTINGS: &str =
    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;";

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
        crate::otel::set_db_system(url);
        let (url, sqlite_file) = if kind == DbKind::Sqlite {
            (create_if_missing(url), prepare_sqlite_file(url)?)
        } else {
            (url.to_owned(), None)
        };
        let options = AnyConnectOptions::from_str(&url).context("parsing DATABASE_URL")?;
        let pool_options = AnyPoolOptions::new()
            .max_connections(if kind == DbKind::Sqlite { 8 } else { 16 })
            .acquire_timeout(Duration::from_secs(10));
        let pool_options = if kind == DbKind::Sqlite {
            // A file connection does not go stale, so it is not pinged before each use:
            // the ping is a round trip to the connection's worker thread, as costly as a
            // small query, and the profile showed it on every event written.
            pool_options
                .test_before_acquire(false)
                .after_connect(|conn, _meta| {
                    Box::pin(async move {
                        conn.execute(SQLITE_SETTINGS).await?;
                        conn.execute("PRAGMA busy_timeout = 10000;").await?;
                        Ok(())
                    })
                })
        } else {
            pool_options
        };
        let pool = pool_options
            .connect_with(options)
            .await
            .with_context(|| format!("connecting to the {kind:?} database"))?;
        Ok(Self {
            pool,
            kind,
            sqlite_file,
        })
    }

    pub async fn migrate(&self) -> anyhow::Result<()> {
        let migrator = match self.kind {
            DbKind::Sqlite => &SQLITE_MIGRATIONS,
            DbKind::Postgres => &POSTGRES_MIGRATIONS,
        };
        migrator
            .run(&self.pool)
            .await
            .context("applying database migrations")?;
        Ok(())
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    pub fn kind(&self) -> DbKind {
        self.kind
    }

    /// The SQLite database's file, for a connection of its own outside the pool.
    pub fn sqlite_file(&self) -> Option<&Path> {
        self.sqlite_file.as_deref()
    }

    /// A transaction that intends to write. SQLite takes the write lock up front
    /// (`BEGIN IMMEDIATE`), so a read-then-write transaction waits for other writers
    /// instead of failing with SQLITE_BUSY when it upgrades.
    pub async fn begin_write(&self) -> Result<Transaction<'static, Any>, sqlx::Error> {
        match self.kind {
            DbKind::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await,
            DbKind::Postgres => self.pool.begin().await,
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
    }
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
/// private too. Existing wider ones are reported. Returns the file, if there is one.
fn prepare_sqlite_file(url: &str) -> anyhow::Result<Option<PathBuf>> {
    let path = url
        .trim_start_matches("sqlite://")
        .trim_start_matches("sqlite:");
    let (path, options) = path.split_once('?').unwrap_or((path, ""));
    if path.is_empty() || path == ":memory:" || options.contains("mode=memory") {
        return Ok(None);
    }
    let path = Path::new(path);
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
    Ok(Some(path.to_owned()))
}

/// `maitred.db` → `maitred.db-wal`.
fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}
