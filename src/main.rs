use std::process::ExitCode;

use clap::Parser;
use maitred::cli::Cli;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    maitred::telemetry::init(cli.log_format);
    match maitred::app::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    }
}
