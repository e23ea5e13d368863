//! The processes of a run: the maitred roles, the scripted upstreams, a private
//! Redis; and what `/proc` says about them.

use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;
use tokio::process::{Child, Command};

pub(crate) fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The processes of one run, their ports and files; dropping it kills them.
pub(crate) struct Stack {
    pub dir: tempfile::TempDir,
    backend: u16,
    mcp: u16,
    /// One port for every phase's gateway: the issuer names it in tokens' audience.
    gateway: u16,
    pub children: Vec<Child>,
    http: reqwest::Client,
}

impl Stack {
    /// The backend and the MCP role, on SQLite in a temporary directory under `data`.
    pub(crate) async fn start(data: &Path) -> anyhow::Result<Self> {
        let mut stack = Self {
            dir: tempfile::tempdir_in(data)?,
            backend: free_port(),
            mcp: free_port(),
            gateway: free_port(),
            children: Vec::new(),
            http: maitred::http_client::new()?,
        };
        let backend = stack.command(&["backend"], "backend")?.spawn()?;
        stack.children.push(backend);
        stack.wait_ready(stack.backend, "/readyz").await?;
        let mcp = stack.command(&["mcp"], "mcp")?.spawn()?;
        stack.children.push(mcp);
        stack.wait_ready(stack.mcp, "/readyz").await?;
        Ok(stack)
    }

    fn log(&self, name: &str) -> anyhow::Result<std::fs::File> {
        Ok(std::fs::File::create(self.dir.path().join(name))?)
    }

    fn command(&self, args: &[&str], log: &str) -> anyhow::Result<Command> {
        self.wrapped_command(&[], args, log)
    }

    /// The scripted upstream's binary, built beside maitred's (it is a dev tool of
    /// its own crate, so cargo does not build it for this bench).
    fn scripted_llm(&self, args: &[&str], log: &str) -> anyhow::Result<Command> {
        let binary = Path::new(env!("CARGO_BIN_EXE_maitred")).with_file_name("scripted-llm");
        if !binary.exists() {
            bail!(
                "{} is missing: build it first with `cargo build --release -p maitred-scripted-llm`",
                binary.display()
            );
        }
        let mut command = Command::new(binary);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(self.log(&format!("{log}.out"))?)
            .stderr(self.log(&format!("{log}.log"))?)
            .kill_on_drop(true);
        Ok(command)
    }

    /// `wrapper` (a profiler's command line, say) runs the binary with `args`.
    fn wrapped_command(
        &self,
        wrapper: &[&str],
        args: &[&str],
        log: &str,
    ) -> anyhow::Result<Command> {
        let binary = env!("CARGO_BIN_EXE_maitred");
        let mut command = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(binary);
                command
            }
            None => Command::new(binary),
        };
        command
            .args(args)
            .env("MAITRED_DATA_DIR", self.dir.path())
            .env("MAITRED_BACKEND_PORT", self.backend.to_string())
            .env("MAITRED_MCP_PORT", self.mcp.to_string())
            .env("MAITRED_GATEWAY_PORT", self.gateway.to_string())
            .env_remove("DATABASE_URL")
            .env_remove("MAITRED_LLM_BASE_URL")
            .env_remove("MAITRED_GATEWAY_CONFIG")
            .env_remove("MAITRED_REDIS_URL")
            .stdin(Stdio::null())
            .stdout(self.log(&format!("{log}.out"))?)
            .stderr(self.log(&format!("{log}.log"))?)
            .kill_on_drop(true);
        Ok(command)
    }

    /// Stops the processes started after the first `running`, and waits for them to
    /// be gone so the next phase can take their ports.
    pub(crate) async fn stop_from(&mut self, running: usize) {
        for mut child in self.children.drain(running..) {
            let _ = child.kill().await;
        }
    }

    async fn wait_ready(&self, port: u16, path: &str) -> anyhow::Result<()> {
        let url = format!("http://127.0.0.1:{port}{path}");
        for _ in 0..600 {
            if let Ok(response) = self.http.get(&url).send().await
                && response.status().is_success()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!(
            "{url} never became ready; logs in {}",
            self.dir.path().display()
        )
    }

    /// A scripted upstream playing `script`; returns its base URL.
    pub(crate) async fn upstream(&mut self, name: &str, script: &Value) -> anyhow::Result<String> {
        let file = self.dir.path().join(format!("{name}.json"));
        std::fs::write(&file, serde_json::to_vec(script)?)?;
        let port = free_port();
        let child = self
            .scripted_llm(
                &[
                    "--script",
                    file.to_str().context("path")?,
                    "--port",
                    &port.to_string(),
                ],
                name,
            )?
            .spawn()?;
        self.children.push(child);
        self.wait_ready(port, "/v1/models").await?;
        Ok(format!("http://127.0.0.1:{port}/v1"))
    }

    /// A gateway process on `upstream` with `config` and the extra `env`; returns its
    /// port and pid.
    pub(crate) async fn gateway(
        &mut self,
        name: &str,
        upstream: &str,
        config: &str,
        env: &[(&str, &str)],
    ) -> anyhow::Result<(u16, u32)> {
        let file = self.dir.path().join(format!("{name}.toml"));
        std::fs::write(&file, config)?;
        let port = self.gateway;
        // `GATEWAY_OVERHEAD_WRAP="valgrind --tool=massif"` profiles the gateway's heap.
        let wrap = std::env::var("GATEWAY_OVERHEAD_WRAP").unwrap_or_default();
        let wrapper: Vec<&str> = wrap.split_whitespace().collect();
        let mut command = self.wrapped_command(&wrapper, &["gateway"], name)?;
        command
            .env("MAITRED_GATEWAY_CONFIG", &file)
            .env("MAITRED_LLM_BASE_URL", upstream)
            .env("MAITRED_LLM_MODEL", "scripted")
            .envs(env.iter().copied());
        let child = command.spawn()?;
        let pid = child.id().context("gateway pid")?;
        self.children.push(child);
        self.wait_ready(port, "/readyz").await?;
        Ok((port, pid))
    }

    pub(crate) async fn token(&self) -> anyhow::Result<String> {
        let out = self
            .command(&["token", "--client", "maitred-cli"], "token")?
            .stdout(Stdio::piped())
            .output()
            .await?;
        if !out.status.success() {
            bail!(
                "maitred token failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8(out.stdout)?.trim().to_owned())
    }

    /// A private Redis on a free port, nothing persisted; it joins the processes.
    pub(crate) async fn redis(&mut self) -> anyhow::Result<Redis> {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(self.log("redis.log")?)
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("starting redis-server (Debian: apt-get install redis-server)")?;
        let pid = child.id().context("redis pid")?;
        self.children.push(child);
        let url = format!("redis://127.0.0.1:{port}/");
        let client = redis::Client::open(url.as_str())?;
        for _ in 0..100 {
            if let Ok(conn) = client.get_multiplexed_async_connection().await {
                return Ok(Redis { url, pid, conn });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("redis-server on port {port} never answered")
    }
}

pub(crate) struct Redis {
    pub url: String,
    pub pid: u32,
    conn: redis::aio::MultiplexedConnection,
}

/// Commands Redis has processed, in all and by name.
pub(crate) struct Commands {
    pub total: u64,
    pub by_name: Vec<(String, u64)>,
}

impl Redis {
    /// From `INFO commandstats`; the `INFO` asking for them counts as one.
    pub(crate) async fn commands(&self) -> anyhow::Result<Commands> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut self.conn.clone())
            .await?;
        let by_name: Vec<(String, u64)> = info
            .lines()
            .filter_map(|line| {
                let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
                let calls = stats.split(',').find_map(|s| s.strip_prefix("calls="))?;
                Some((name.to_owned(), calls.parse().ok()?))
            })
            .collect();
        Ok(Commands {
            total: by_name.iter().map(|(_, n)| n).sum(),
            by_name,
        })
    }
}

impl Commands {
    /// What was processed since `before`, by name, the most frequent first.
    pub(crate) fn since(&self, before: &Commands) -> Commands {
        let mut by_name: Vec<(String, u64)> = self
            .by_name
            .iter()
            .map(|(name, n)| {
                let was = before
                    .by_name
                    .iter()
                    .find(|(b, _)| b == name)
                    .map_or(0, |(_, n)| *n);
                (name.clone(), n.saturating_sub(was))
            })
            .filter(|(name, n)| *n > 0 && name != "info")
            .collect();
        by_name.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        Commands {
            total: by_name.iter().map(|(_, n)| n).sum(),
            by_name,
        }
    }
}

pub(crate) fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("VmRSS in /proc/<pid>/status")
}

/// CPU time a process has used, user and system: `utime + stime` of
/// `/proc/<pid>/stat`, in clock ticks converted to time.
pub(crate) fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name may hold spaces; the fields after it do not.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("/proc/<pid>/stat")?
        .1
        .split_whitespace()
        .collect();
    // After the name: state is field 3 of the whole line, utime 14, stime 15.
    let ticks = |n: usize| -> anyhow::Result<u64> {
        Ok(fields
            .get(n - 3)
            .context("a field of /proc/<pid>/stat")?
            .parse()?)
    };
    let total = ticks(14)? + ticks(15)?;
    Ok(Duration::from_secs_f64(total as f64 / clock_ticks() as f64))
}

/// Time a process's threads have spent on a CPU, in nanoseconds: the first field of
/// each `/proc/<pid>/task/<tid>/schedstat`. Unlike `utime + stime`, which count 10 ms
/// ticks, this is exact enough to cost one answer of a few milliseconds.
pub(crate) fn cpu_ns(pid: u32) -> anyhow::Result<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let path = task?.path().join("schedstat");
        // A thread that ended between the listing and the read has nothing to add.
        let Ok(stat) = std::fs::read_to_string(path) else {
            continue;
        };
        total += stat
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .context("schedstat")?;
    }
    Ok(total)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux in practice).
fn clock_ticks() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100)
    })
}
