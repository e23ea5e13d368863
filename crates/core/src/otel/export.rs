//! The exporting side: a tracer provider per role (each with its own `service.name`),
//! one tracer that picks among them by the span's [`ServingRole`], and the OTLP/HTTP
//! exporter sending through our reqwest client.

use std::time::Duration;

use opentelemetry::trace::{SpanBuilder, Tracer, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tokio::runtime::Handle;

use super::{Config, STATE, ServingRole, State};

/// The running export: flushed and stopped by [`Exporter::shutdown`].
pub struct Exporter {
    providers: Vec<SdkTracerProvider>,
    tracer: RoleTracer,
}

impl Exporter {
    /// Builds the providers; call within the runtime (exports run on it).
    pub fn start(config: &Config) -> anyhow::Result<Self> {
        let http = OtlpHttp {
            http: crate::http_client::new()?,
            runtime: Handle::try_current()?,
        };
        let provider = |name: String| -> anyhow::Result<SdkTracerProvider> {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(http.clone())
                .with_protocol(Protocol::HttpBinary)
                .build()?;
            let resource = Resource::builder()
                .with_service_name(name)
                .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
                .build();
            Ok(SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(resource)
                .build())
        };
        let mut providers = Vec::new();
        let mut roles = Vec::new();
        for &role in &config.roles {
            let p = provider(config.service_name(role))?;
            roles.push((role, p.tracer("maitred")));
            providers.push(p);
        }
        let other = provider(config.process_name())?;
        let tracer = RoleTracer {
            roles,
            other: other.tracer("maitred"),
        };
        providers.push(other);
        let _ = STATE.set(State {
            capture_content: config.capture_content,
            db_system: Default::default(),
        });
        Ok(Self { providers, tracer })
    }

    pub(crate) fn tracer(&self) -> RoleTracer {
        self.tracer.clone()
    }

    /// Sends what is still batched, then stops (at most a few seconds).
    pub async fn shutdown(self) {
        let providers = self.providers;
        let flushed = tokio::task::spawn_blocking(move || {
            for provider in providers {
                if let Err(error) = provider.shutdown_with_timeout(Duration::from_secs(5)) {
                    tracing::warn!(%error, "flushing traces at shutdown");
                }
            }
        });
        let _ = flushed.await;
    }
}

/// Starts each span with the provider of the role its context names; spans of no
/// role's request go to the process's own service.
#[derive(Debug, Clone)]
pub(crate) struct RoleTracer {
    roles: Vec<(&'static str, SdkTracer)>,
    other: SdkTracer,
}

impl Tracer for RoleTracer {
    type Span = opentelemetry_sdk::trace::Span;

    fn build_with_context(&self, builder: SpanBuilder, parent_cx: &Context) -> Self::Span {
        let role = parent_cx.get::<ServingRole>().map(|r| r.0);
        let tracer = self
            .roles
            .iter()
            .find(|(name, _)| Some(*name) == role)
            .map_or(&self.other, |(_, tracer)| tracer);
        tracer.build_with_context(builder, parent_cx)
    }
}

/// The exporter's HTTP client: the batch processor exports from its own thread, so
/// each request runs on the runtime it was started in.
#[derive(Debug, Clone)]
struct OtlpHttp {
    http: reqwest::Client,
    runtime: Handle,
}

#[async_trait::async_trait]
impl HttpClient for OtlpHttp {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let http = self.http.clone();
        let (status, headers, body) = self
            .runtime
            .spawn(async move {
                let response = http.execute(request).await?;
                let (status, headers) = (response.status(), response.headers().clone());
                let body = response.bytes().await?;
                Ok::<_, reqwest::Error>((status, headers, body))
            })
            .await??;
        let mut response = Response::builder().status(status).body(body)?;
        *response.headers_mut() = headers;
        Ok(response)
    }
}
