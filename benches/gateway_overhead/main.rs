//! What the gateway adds to a streamed answer. Every part runs as its own process,
//! as deployed: the scripted upstream (`scripted-llm`: build it first with
//! `cargo build --release -p maitred-scripted-llm`), the backend, the MCP role and the
//! gateway (release builds), with this process as the client.
//!
//! - Time to first token and the gap between tokens, for a client streaming straight
//!   from the upstream beside one streaming through the gateway's chat endpoint (no
//!   tools), at 1 and at 100 concurrent streams; the upstream sends 64 fragments at a
//!   fixed pace.
//! - The gateway's resident memory idle and with 1,000 open streams whose upstream
//!   never answers.
//! - A one-tool question end to end (gateway → MCP → backend → SQLite) minus the
//!   upstream's own time for the same two model turns.
//! - Live state in process beside live state in Redis (a private `redis-server` on a
//!   free port): time to first token, a burst of 1,000 questions at once, the
//!   gateway's CPU and Redis's commands per answer.
//! - The performance table, in process and with Redis: time to first token added at 1
//!   and 100 streams, CPU per answer at the upstream's pace and back to back, memory
//!   per open answer and RSS after 400 answers.
//!
//!     cargo bench --bench gateway_overhead [-- --pace-ms 20 --streams 50 --rounds 3 --idle 1000 --questions 100 --burst 1000 --only live --keep-logs]
//!
//! `--only` runs one phase: `streaming`, `idle`, `tool`, `live` or `targets`
//! (the performance table: every row of docs/benchmarks.md's "Where the time goes").

#![expect(
    clippy::expect_used,
    reason = "a benchmark that cannot run has nothing to report: failing loudly is right"
)]
#![expect(clippy::print_stdout, reason = "a benchmark prints its tables")]
#![expect(
    clippy::disallowed_methods,
    reason = "the benchmark's own concurrent clients, not request code"
)]

mod live_state;
mod measure;
mod overhead;
mod processes;
mod targets;

use processes::Stack;

pub struct Options {
    pace_ms: u64,
    streams: usize,
    rounds: usize,
    idle: usize,
    questions: usize,
    burst: usize,
    only: Option<String>,
}

impl Options {
    fn from_args() -> Self {
        let args: Vec<String> = std::env::args().collect();
        let value = |name: &str| {
            args.iter()
                .position(|a| a == name)
                .and_then(|i| args.get(i + 1))
        };
        let get = |name: &str, default: usize| {
            value(name).and_then(|v| v.parse().ok()).unwrap_or(default)
        };
        Self {
            pace_ms: get("--pace-ms", 20) as u64,
            streams: get("--streams", 50),
            rounds: get("--rounds", 3),
            idle: get("--idle", 1000),
            questions: get("--questions", 100),
            burst: get("--burst", 1000),
            only: value("--only").cloned(),
        }
    }

    fn runs(&self, phase: &str) -> bool {
        self.only.as_deref().is_none_or(|only| only == phase)
    }
}

/// Limits out of the way: the benchmark measures the gateway, not its guards.
pub const UNLIMITED: &str = r#"
[resilience]
model_concurrency = 100000
model_requests_per_minute = 0
first_token_timeout_secs = 600
inter_token_timeout_secs = 600

[limits]
requests_per_minute = 0
concurrent_generations = 100000
tool_calls_per_question = 25
"#;

pub fn no_tools() -> String {
    format!(
        "{UNLIMITED}\n[[mcp_servers]]\nname = \"none\"\nurl = \"http://127.0.0.1:9/mcp\"\nenabled = false\n"
    )
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    format!(
        "{} cores, {cpu}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let options = Options::from_args();
    println!("# gateway overhead ({})", machine());
    let mut stack = Stack::start(&std::env::temp_dir()).await?;
    // Each phase starts its own gateway and upstream, and stops them when done.
    let result = async {
        if options.runs("streaming") {
            overhead::streaming(&mut stack, &options).await?;
        }
        if options.runs("idle") {
            overhead::idle_streams(&mut stack, &options).await?;
        }
        if options.runs("tool") {
            overhead::one_tool(&mut stack, &options).await?;
        }
        if options.runs("live") {
            live_state::live_state(&mut stack, &options).await?;
        }
        if options.runs("targets") {
            targets::targets(&mut stack, &options).await?;
        }
        anyhow::Ok(())
    }
    .await;
    if result.is_err() || std::env::args().any(|a| a == "--keep-logs") {
        let kept = stack.dir.keep();
        eprintln!("the processes' logs are kept in {}", kept.display());
    }
    result
}
