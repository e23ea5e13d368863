//! The gateway role: a person's question in, an LLM tool loop over MCP tools, the
//! answer streamed back over SSE, with conversations, approvals and a browser login.

pub mod accounts;
pub mod answer;
mod auth;
pub mod background;
#[cfg(test)]
mod bindings;
pub mod budgets;
pub mod chat;
mod error;
mod extract;
mod grounding;
pub mod live;
mod login;
pub mod metrics;
pub mod openai_api;
pub mod session;
pub mod tools;
mod ui;

use std::net::IpAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRef};
use axum::routing::{delete, get, post, put};
use secrecy::SecretString;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_http::csrf::CsrfLayer;

pub use auth::ChatUser;
pub use error::GatewayError;
pub use grounding::times_stated;

use accounts::{AccountSettings, Accounts};
use answer::Answerer;
use chat::approvals::Approvals;
use chat::inputs::ToolInputs;
use chat::store::Store;
use live::Live;
use maitred_core::auth::{TokenVerifier, VerifierConfig};
use maitred_core::db::Db;
use maitred_core::dev::DevCredentials;
use maitred_core::http;
use maitred_core::http::budget::Budget;
use maitred_core::metrics::Metrics;
use maitred_core::settings::Mode;
use maitred_core::settings::mcp_servers::{AuthConfig, ClientAuth, ServerConfig};
use maitred_core::settings::{API_PREFIX, Settings};
use maitred_llm::ChatModel;
use maitred_llm::router::ModelRouter;
use metrics::GatewayMetrics;
use session::Sessions;
use tools::policy::ToolPolicy;
use tools::{HubWiring, ToolHub};

#[derive(Clone)]
pub struct GatewayState {
    pub answerer: Arc<Answerer>,
    /// The MCP servers and their tools (the answerer's, as a port).
    pub hub: Arc<ToolHub>,
    /// People's own sign-ins at the servers that want them.
    pub accounts: Arc<Accounts>,
    pub store: Store,
    pub approvals: Arc<Approvals>,
    pub inputs: Arc<ToolInputs>,
    /// Tool calls their servers run as tasks, followed after their answers ended.
    pub background: Arc<background::TaskBook>,
    /// Running answers: their events, viewers, cancel signals and limits.
    pub live: Live,
    /// The Responses API's records of its answers.
    pub responses: Arc<openai_api::responses::book::ResponseBook>,
    /// Told when an answer is taken over or ends (the responses' records).
    pub hooks: Arc<dyn chat::hooks::AnswerHooks>,
    pub sessions: Arc<Sessions>,
    pub verifier: Arc<TokenVerifier>,
    /// Cancelled at shutdown: no new questions from then on.
    pub shutdown: CancellationToken,
    pub tasks: TaskTracker,
    pub body_limit: usize,
    /// The gateway's registry, served at `/metrics`; gateway series register on it.
    pub metrics: Metrics,
    pub gateway_metrics: GatewayMetrics,
    /// Question limits, history budget and stream timings.
    pub settings: Arc<maitred_core::settings::GatewaySettings>,
    /// The web UI served at `/`.
    pub ui: ui::UiFiles,
    /// Sign-ins per client address.
    pub login_budget: Arc<Budget<IpAddr>>,
}

impl GatewayState {
    /// Spends one sign-in request of `ip`'s budget.
    pub fn login_limit(&self, ip: IpAddr) -> Result<(), GatewayError> {
        self.login_budget.spend(&ip).map_err(|wait| {
            tracing::warn!(%ip, "sign-in rate limit exceeded");
            GatewayError::RateLimited {
                reason: "too many sign-in attempts from your address".to_owned(),
                retry_after: wait.as_secs().max(1),
            }
        })
    }
}

impl FromRef<GatewayState> for Arc<TokenVerifier> {
    fn from_ref(state: &GatewayState) -> Self {
        state.verifier.clone()
    }
}

/// The MCP servers: the configured file, or maitred's own MCP role.
fn servers(settings: &Settings) -> anyhow::Result<Vec<ServerConfig>> {
    if !settings.gateway.file.mcp_servers.is_empty() {
        return Ok(settings.gateway.file.mcp_servers.clone());
    }
    let secret = match (&settings.gateway.mcp_client_secret, settings.mode) {
        (Some(secret), _) => secret.clone(),
        (None, Mode::Dev) => DevCredentials::load(&settings.data_dir)?
            .client_secret("maitred-gateway")
            .map(SecretString::from)
            .context("no dev secret for client maitred-gateway")?,
        (None, Mode::Production) => anyhow::bail!(
            "the gateway needs MAITRED_GATEWAY_CLIENT_SECRET (its secret for the MCP server), or an MCP servers file"
        ),
    };
    Ok(vec![own_mcp_server(settings, secret)])
}

/// maitred's own MCP role as the gateway reaches it, with `secret` as the gateway's
/// client secret at the issuer.
pub fn own_mcp_server(settings: &Settings, secret: SecretString) -> ServerConfig {
    ServerConfig {
        name: "resos".to_owned(),
        url: settings
            .gateway
            .mcp_url
            .clone()
            .unwrap_or_else(|| settings.mcp_resource()),
        enabled: true,
        read_only: false,
        timeout: std::time::Duration::from_secs_f64(30.0),
        // maitred's own server takes delegated tokens: calls reach it, and through it
        // the backend, as the person who asked.
        auth: AuthConfig::TokenExchange(ClientAuth {
            client_id: "maitred-gateway".to_owned(),
            client_secret: Some(secret),
            client_secret_env: None,
            // None asked for by name: the issuer grants what the caller may pass on
            // (a person who only reads, a client whose registration holds only
            // `mcp.read`) rather than refusing a request for more.
            scopes: Vec::new(),
            resource: Some(settings.mcp_resource()),
            issuer: None,
            token_url: None,
        }),
        // maitred's own server: its annotations are ours, so they are believed.
        trust_annotations: true,
        read_only_tools: Vec::new(),
        require_approval: Vec::new(),
        description: None,
        offer: Default::default(),
        pinned: Vec::new(),
    }
}

/// The configured model, or the offline one (a build without the `offline-model`
/// feature needs an LLM endpoint).
pub fn model(settings: &Settings, http: reqwest::Client) -> anyhow::Result<Arc<dyn ChatModel>> {
    match &settings.gateway.llm {
        Some(llm) => {
            tracing::info!(model = %llm.model, base_url = %llm.base_url, "LLM: an OpenAI-compatible endpoint");
            Ok(Arc::new(maitred_llm::openai::OpenAiModel::new(
                http,
                llm.clone(),
            )))
        }
        None => offline_model(settings),
    }
}

#[cfg(feature = "offline-model")]
fn offline_model(settings: &Settings) -> anyhow::Result<Arc<dyn ChatModel>> {
    tracing::info!(
        "LLM: none configured; the built-in offline model answers (set MAITRED_LLM_BASE_URL for a real one)"
    );
    Ok(Arc::new(
        maitred_offline_model::OfflineModel::new()
            .with_fragment_delay(settings.gateway.offline_fragment_delay)
            .with_grounding(settings.gateway.offline_grounding),
    ))
}

#[cfg(not(feature = "offline-model"))]
fn offline_model(_: &Settings) -> anyhow::Result<Arc<dyn ChatModel>> {
    anyhow::bail!(
        "no LLM configured, and this build has no offline model: set MAITRED_LLM_BASE_URL and MAITRED_LLM_MODEL"
    )
}

/// Builds the gateway role; `model` is usually [`model`], tests pass their own.
pub async fn router(
    settings: &Settings,
    db: Db,
    model: Arc<dyn ChatModel>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
) -> anyhow::Result<(Router, GatewayState)> {
    let metrics = Metrics::for_scrapes_with(settings.metrics_token.as_ref());
    let gateway_metrics = GatewayMetrics::register(&metrics);
    let http = maitred_core::http_client::new()?;
    let streaming = maitred_core::http_client::streaming()?;
    let verifier = Arc::new(TokenVerifier::new(
        http.clone(),
        VerifierConfig::new(settings.issuer_location(), settings.gateway_resource()),
    ));
    let file = &settings.gateway.file;
    let servers = servers(settings)?;
    let dev = settings.mode == Mode::Dev;
    // One key ring seals every person's token the gateway keeps.
    let sealing = Accounts::key_ring(
        settings.gateway.account_keys.as_ref(),
        dev.then_some(settings.data_dir.as_path()),
    )?;
    let accounts = Accounts::new(
        db.clone(),
        &servers,
        AccountSettings {
            http: http.clone(),
            events: gateway_metrics.account_events.clone(),
            public_url: &settings.gateway.endpoint.public_url,
            keys: sealing.clone(),
            connect_timeout: settings.gateway.connect_timeout,
            sign_ins_per_person: settings.gateway.sign_ins_per_person,
            loopback_http: dev,
            url_policy: settings.url_policy(),
        },
    );
    // After a key rotation, what older keys sealed is sealed again under the new one.
    tasks.spawn({
        let accounts = accounts.clone();
        async move {
            match accounts.reseal().await {
                Ok(0) => {}
                Ok(count) => {
                    tracing::info!(count, "sealed connected accounts again under the first key")
                }
                Err(error) => tracing::warn!(%error, "could not seal connected accounts again"),
            }
        }
    });
    let hub = ToolHub::new(
        servers,
        HubWiring {
            http: streaming.clone(),
            issuer: &settings.issuer_location(),
            resilience: &file.resilience,
            token_requests: gateway_metrics.token_requests.clone(),
            tasks: tasks.clone(),
            loopback_http: dev,
            accounts: accounts.clone(),
            search: file.tool_search.clone(),
        },
    )?;
    GatewayMetrics::watch_breakers(&metrics, hub.clone());
    // Discover the tools now rather than on the first question; a server not up yet
    // is tried again when the next question needs it.
    tasks.spawn({
        let hub = hub.clone();
        async move {
            hub.catalogue().await;
        }
    });
    let store = Store::new(db.clone());
    // Ends once the answers have ended at shutdown, so their last events are written.
    let live_stop = CancellationToken::new();
    let timings = live::Timings {
        grace: settings.gateway.stream_grace,
        lease: settings.gateway.answer_lease,
        ..live::Timings::default()
    };
    let mut left_open = None;
    let live: Live = match &settings.gateway.redis {
        Some(redis) => {
            live::redis::RedisLive::start(
                redis,
                store.clone(),
                &file.limits,
                &file.resilience,
                timings,
                gateway_metrics.clone(),
                tasks.clone(),
                live_stop.clone(),
            )
            .await?
        }
        None => {
            let memory = live::memory::MemoryLive::start(
                db.clone(),
                &settings.data_dir,
                &file.limits,
                &file.resilience,
                timings,
                gateway_metrics.clone(),
                tasks.clone(),
                live_stop.clone(),
            )?;
            left_open = Some(memory.clone());
            memory
        }
    };
    let approvals = Arc::new(Approvals::new(
        db.clone(),
        settings.gateway.approval_timeout,
        live.clone(),
    ));
    let inputs = Arc::new(ToolInputs::new(
        db.clone(),
        settings.gateway.input_timeout,
        live.clone(),
    ));
    // Every model that may answer, the primary first: budgets reserve at the dearest.
    let mut model_names = vec![model.name().to_owned()];
    let mut models = vec![model];
    for fallback in settings.gateway.file.fallback_models()? {
        tracing::info!(model = %fallback.model, base_url = %fallback.base_url, "LLM fallback");
        model_names.push(fallback.model.clone());
        models.push(Arc::new(maitred_llm::openai::OpenAiModel::new(
            streaming.clone(),
            fallback,
        )));
    }
    let gateway = &settings.gateway;
    let background = Arc::new(background::TaskBook::new(
        db.clone(),
        hub.clone(),
        background::TaskLimits {
            per_person: gateway.tasks_per_person,
            per_server: gateway.tasks_per_server,
            give_up: gateway.task_give_up,
        },
        gateway.tool_output_cap,
        tasks.clone(),
    ));
    let answerer = Arc::new(Answerer {
        models: ModelRouter::new(models, file.resilience.clone(), live.models()),
        policy: ToolPolicy::new(file.policy.clone()),
        tools: hub.clone(),
        approvals: approvals.clone(),
        inputs: inputs.clone(),
        background: background.clone(),
        limits: answer::Limits {
            max_iterations: gateway.max_iterations,
            tool_calls_per_question: file.limits.tool_calls_per_question,
            tool_output_cap: gateway.tool_output_cap,
            system_prompt: gateway.system_prompt.clone(),
            max_output_tokens: file.budgets.max_output_tokens,
        },
        metrics: gateway_metrics.clone(),
        budgets: Arc::new(budgets::DbBudgets::new(
            db.clone(),
            file.prices.clone(),
            model_names,
        )),
    });
    // Shutting down does not wait for a model to read its prompt.
    tasks.spawn({
        let answerer = answerer.clone();
        let shutdown = shutdown.clone();
        async move {
            tokio::select! {
                () = answerer.warm_up() => {}
                () = shutdown.cancelled() => {}
            }
        }
    });
    let responses = Arc::new(openai_api::responses::book::ResponseBook::new(
        db.clone(),
        live.clone(),
    ));
    let hooks: Arc<dyn chat::hooks::AnswerHooks> = responses.clone();
    live.resume_with(Arc::new(chat::resume::Resumer::new(
        &answerer,
        store.clone(),
        gateway_metrics.clone(),
        tasks.clone(),
        chat::resume::Resuming {
            enabled: gateway.resume_answers,
            max: gateway.resume_max,
            context_budget: gateway.context_budget,
        },
        &hooks,
    )));
    // Without Redis, the answers a crash of this process left open are taken over
    // (or ended) before it serves: a viewer who comes back finds them going on.
    if let Some(memory) = left_open {
        match memory.recover(&store).await {
            Ok((0, 0)) => {}
            Ok((resumed, ended)) => {
                tracing::warn!(
                    resumed,
                    ended,
                    "took over the answers the last run left open"
                );
            }
            Err(error) => {
                tracing::error!(%error, "taking over the answers the last run left open");
            }
        }
    }
    let sessions = Arc::new(
        Sessions::new(
            db.clone(),
            http,
            settings.issuer_location(),
            verifier.clone(),
            &settings.gateway.endpoint.public_url,
            settings.gateway_resource(),
            sealing,
        )
        .seeing_revocations(settings.builtin_identity()),
    );
    // Sessions' tokens sealed under an older key, or kept in clear by an earlier
    // version, are sealed under the first key now.
    match sessions.seal_at_rest().await {
        Ok(0) => {}
        Ok(count) => tracing::info!(count, "sealed browser sessions' tokens under the first key"),
        Err(error) => tracing::warn!(%error, "could not seal browser sessions' tokens again"),
    }
    // At shutdown, running answers get a bounded time to finish.
    tasks.spawn({
        let local = live.local().clone();
        let shutdown = shutdown.clone();
        let grace = file.resilience.shutdown_grace;
        async move {
            shutdown.cancelled().await;
            local.drain(grace).await;
            live_stop.cancel();
        }
    });
    let state = GatewayState {
        answerer,
        hub,
        accounts,
        store,
        approvals,
        inputs,
        background: background.clone(),
        live,
        responses,
        hooks,
        sessions,
        verifier,
        shutdown,
        tasks: tasks.clone(),
        body_limit: settings.backend.body_limit,
        metrics,
        gateway_metrics,
        settings: Arc::new(settings.gateway.clone()),
        ui: ui::UiFiles::new(settings.gateway.ui_dir.clone()),
        login_budget: Arc::new(Budget::per_minute(settings.identity.rate_limit_per_minute)),
    };
    let api = Router::new()
        .route(&format!("{API_PREFIX}/stream/chat"), post(chat::ask))
        .route(
            &format!("{API_PREFIX}/stream/chat/{{message_id}}"),
            get(chat::resume),
        )
        .route(
            &format!("{API_PREFIX}/chat/{{message_id}}/cancel"),
            post(chat::cancel),
        )
        .route(
            &format!("{API_PREFIX}/chat/approvals/{{id}}"),
            post(chat::decide),
        )
        .route(
            &format!("{API_PREFIX}/chat/inputs/{{id}}"),
            post(chat::answer_input),
        )
        .route(
            &format!("{API_PREFIX}/chat/tasks/{{id}}/cancel"),
            post(background::routes::cancel),
        )
        .route(
            &format!("{API_PREFIX}/chat/tasks/{{id}}/input"),
            post(background::routes::answer),
        )
        .route(
            &format!("{API_PREFIX}/conversations/{{id}}/tasks"),
            get(background::routes::list),
        )
        .route(
            &format!("{API_PREFIX}/conversations"),
            get(chat::conversations),
        )
        .route(
            &format!("{API_PREFIX}/conversations/{{id}}"),
            get(chat::conversation).delete(chat::delete_conversation),
        )
        .route(
            &format!("{API_PREFIX}/admin/budgets"),
            get(budgets::routes::list),
        )
        .route(
            &format!("{API_PREFIX}/admin/budgets/ledger"),
            get(budgets::routes::ledger),
        )
        .route(
            &format!("{API_PREFIX}/admin/budgets/{{scope}}/{{subject}}"),
            put(budgets::routes::put)
                .get(budgets::routes::get_one)
                .delete(budgets::routes::delete),
        )
        .route(
            &format!("{API_PREFIX}/accounts"),
            get(accounts::routes::list),
        )
        .route(
            &format!("{API_PREFIX}/accounts/{{server}}/connect"),
            post(accounts::routes::connect),
        )
        .route(
            &format!("{API_PREFIX}/accounts/{{server}}"),
            delete(accounts::routes::disconnect),
        )
        .route(
            &format!("{API_PREFIX}/admin/accounts"),
            get(accounts::routes::admin_list),
        )
        .route(accounts::CALLBACK_PATH, get(accounts::routes::callback))
        .route(
            accounts::METADATA_DOCUMENT_PATH,
            get(accounts::routes::metadata_document),
        )
        .merge(login::routes())
        .merge(openai_api::routes())
        .fallback(ui::serve)
        .layer(DefaultBodyLimit::max(settings.backend.body_limit))
        // Browsers' Sec-Fetch-Site and Origin refuse cross-site writes outright; the
        // session's CSRF token is the second line.
        .layer(CsrfLayer::new())
        .with_state(state.clone());
    // Every replica follows the background tasks no live replica holds.
    tasks.spawn(background::watch(
        state.clone(),
        background,
        settings.gateway.answer_lease,
        state.shutdown.clone(),
    ));
    let router = http::health::routes(http::health::database(db)).merge(api);
    Ok((
        http::middleware::wrap(
            router,
            &state.metrics,
            &settings.trusted_proxies,
            &settings.trace_callers,
        ),
        state,
    ))
}
