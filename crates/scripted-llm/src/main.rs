//! `scripted-llm --script FILE`: the scripted upstream as its own process, for the
//! browser tests and the benchmarks. A development tool, never in the release binary.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// A scripted OpenAI-compatible server: answers each chat completion request with
/// the script's next turn.
#[derive(Debug, Parser)]
#[command(name = "scripted-llm", version)]
struct Args {
    /// The JSON script (format: the maitred-scripted-llm crate's documentation).
    #[arg(long)]
    script: PathBuf,
    /// Address to listen on.
    #[arg(long, env = "MAITRED_BIND", default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Port to listen on.
    #[arg(long, default_value_t = 8090)]
    port: u16,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let addr = SocketAddr::new(args.bind, args.port);
    match maitred_scripted_llm::serve_from_file(&args.script, addr).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    }
}
