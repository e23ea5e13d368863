//! From a command line to running roles. `main` calls [`run`]; the tests start the
//! same [`App`] on port 0.

mod build;
mod roles;

use anyhow::Context;

pub use build::{App, Bound, Role};
pub use roles::{backend_router, open_database};

use crate::cli::{Cli, Command, IssuerArgs, TokenCommand};
use crate::db::Db;
use crate::settings::{RoleArgs, Settings};
use crate::{http_client, identity, mcp, oauth_client, shutdown};

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        None => {
            serve(
                Settings::resolve(&cli.all.common, (&*cli.all).into())?,
                Role::ALL,
            )
            .await
        }
        Some(Command::All(all)) => {
            serve(Settings::resolve(&all.common, (&*all).into())?, Role::ALL).await
        }
        Some(Command::Backend(args)) => {
            let roles = RoleArgs {
                identity: Some(&args.identity),
                backend: Some(&args.backend),
                ..RoleArgs::default()
            };
            serve(Settings::resolve(&args.common, roles)?, &[Role::Backend]).await
        }
        Some(Command::Mcp(args)) => {
            let roles = RoleArgs {
                mcp: Some(&args.mcp),
                ..RoleArgs::default()
            };
            let settings = Settings::resolve(&args.common, roles)?;
            if args.stdio {
                mcp::serve_stdio(&settings, http_client::new()?).await
            } else {
                serve(settings, &[Role::Mcp]).await
            }
        }
        Some(Command::Gateway(args)) => {
            let roles = RoleArgs {
                gateway: Some(&args.gateway),
                ..RoleArgs::default()
            };
            serve(Settings::resolve(&args.common, roles)?, &[Role::Gateway]).await
        }
        Some(Command::Migrate(state)) => {
            let url = match &state.database_url {
                Some(url) => url.clone(),
                None => crate::settings::sqlite_url(&state.data_dir.join("maitred.db")),
            };
            let db = Db::connect(&url).await?;
            db.migrate().await?;
            tracing::info!("migrations applied");
            db.close().await;
            Ok(())
        }
        Some(Command::Token(args)) => print_token(&args).await,
        Some(Command::Eval(args)) => crate::eval::run(&args).await,
    }
}

async fn serve(settings: Settings, roles: &[Role]) -> anyhow::Result<()> {
    App::bind(settings, roles)
        .await?
        .start(shutdown::on_signal())
        .await?
        .run()
        .await
}

/// `maitred token`: only the token goes to stdout, so `TOKEN=$(maitred token …)` works.
#[expect(clippy::print_stdout, reason = "the CLI's output: the token alone")]
async fn print_token(args: &TokenCommand) -> anyhow::Result<()> {
    let token = client_token(
        &args.data_dir,
        &args.issuer,
        &args.client,
        args.secret.clone(),
        args.scope.as_deref(),
        args.resource.clone(),
    )
    .await?;
    println!("{token}");
    Ok(())
}

/// A client-credentials token for `client` from the issuer, its secret given or read
/// from the dev credentials in `data_dir` (`maitred token`, `maitred eval`).
pub(crate) async fn client_token(
    data_dir: &std::path::Path,
    issuer: &IssuerArgs,
    client: &str,
    secret: Option<String>,
    scope: Option<&str>,
    resource: Option<String>,
) -> anyhow::Result<String> {
    let secret = match secret {
        Some(secret) => secret,
        None => identity::dev::DevCredentials::load(data_dir)?
            .client_secret(client)
            .map(str::to_owned)
            .with_context(|| {
                format!(
                    "no secret for client {client} in the dev credentials; pass --secret or MAITRED_CLIENT_SECRET"
                )
            })?,
    };
    let http = http_client::new()?;
    let token_url = oauth_client::discover_token_url(&http, &issuer.location()?).await?;
    let token = oauth_client::client_credentials(
        &http,
        &oauth_client::ClientCredentials {
            token_url,
            client_id: client.to_owned(),
            client_secret: secret.into(),
            scopes: scope
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
            resource,
        },
    )
    .await?;
    Ok(token.token)
}
