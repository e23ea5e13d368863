use std::process::ExitCode;

use clap::Parser;
use maitred::cli::Cli;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let traces = maitred::otel::Config::from_env(&maitred::otel::roles_of(cli.command.as_ref()));
    let telemetry = maitred::telemetry::init(cli.log_format, traces);
    let code = match maitred::app::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    };
    telemetry.shutdown().await;
    code
}
