//! Prometheus metrics: one registry per role, served at `/metrics`.
//!
//! Each role builds its own [`Metrics`] (tests run several roles in one process, so
//! there is no global registry), registers its own series on it, and hands it to
//! [`crate::http::middleware::wrap`], which records the HTTP series and serves
//! `/metrics`. Names get the `maitred_` prefix from the registry; counters get
//! `_total` from the encoder. The text is OpenMetrics 1.0.

use std::sync::{Arc, Mutex, MutexGuard};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry, Unit};

use crate::db::Db;

/// The content type of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Request latency buckets, in seconds: 5 ms to 10 s.
pub const LATENCY_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A histogram family whose histograms use [`LATENCY_BUCKETS`]; the constructor is
/// a plain `fn` so the type can be named in a struct.
pub type LatencyFamily<L> = Family<L, Histogram, fn() -> Histogram>;

pub fn latency_family<L: EncodeLabelSet + Clone + std::hash::Hash + Eq>() -> LatencyFamily<L> {
    Family::new_with_constructor(latency_histogram as fn() -> Histogram)
}

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// A role's registry and its HTTP series. Cloning is cheap and shares both.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Mutex<Registry>,
    http: HttpMetrics,
    /// `MAITRED_METRICS_TOKEN`: what a scrape of `/metrics` must bring, if set.
    scrape_token: Option<secrecy::SecretString>,
}

/// What the common middleware records for every request.
#[derive(Clone)]
pub struct HttpMetrics {
    pub requests: Family<HttpLabels, Counter>,
    pub duration: LatencyFamily<RouteLabels>,
    pub in_flight: Gauge,
}

/// `route` is the router's pattern (`/api/v1/resos/bookings/{id}`) or `unmatched`,
/// never the raw path; `method` is one of the standard methods or `other`. Both
/// keep the number of series bounded whatever clients send.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    pub method: &'static str,
    pub route: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: &'static str,
    pub route: String,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry whose `/metrics` answers only a scrape bearing `token`
    /// (`MAITRED_METRICS_TOKEN`), or anyone when `None`.
    pub fn for_scrapes_with(token: Option<&secrecy::SecretString>) -> Self {
        Self::made(token.cloned())
    }

    /// What a scrape must bring, if anything.
    pub fn scrape_token(&self) -> Option<&secrecy::SecretString> {
        self.inner.scrape_token.as_ref()
    }

    /// A fresh registry with the HTTP series registered.
    pub fn new() -> Self {
        Self::made(None)
    }

    fn made(scrape_token: Option<secrecy::SecretString>) -> Self {
        let mut registry = Registry::with_prefix("maitred");
        let http = HttpMetrics {
            requests: Family::default(),
            duration: latency_family(),
            in_flight: Gauge::default(),
        };
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route pattern and status",
            http.requests.clone(),
        );
        registry.register_with_unit(
            "http_request_duration",
            "Time from receiving an HTTP request to sending its response head, by method and route \
(for a streamed response, such as SSE, the stream's own length is not included)",
            Unit::Seconds,
            http.duration.clone(),
        );
        registry.register(
            "http_requests_in_flight",
            "HTTP requests received whose response head has not been sent yet",
            http.in_flight.clone(),
        );
        Self {
            inner: Arc::new(Inner {
                registry: Mutex::new(registry),
                http,
                scrape_token,
            }),
        }
    }

    /// Adds a metric family. `name` is without the `maitred_` prefix, and for a
    /// counter without `_total` (both are added on output): registering the counter
    /// `gateway_generations` exports `maitred_gateway_generations_total`. A name that
    /// measures something in seconds should end in `_seconds`, or use
    /// [`Metrics::register_with_unit`]. Keep the metric (it is a cheap handle) to
    /// update it.
    pub fn register(&self, name: &str, help: &str, metric: impl Metric) {
        self.registry().register(name, help, metric);
    }

    /// As [`Metrics::register`], with a unit the exposition appends to the name and
    /// declares (`register_with_unit("tool_call_duration", …, Unit::Seconds, …)`
    /// exports `maitred_tool_call_duration_seconds`).
    pub fn register_with_unit(&self, name: &str, help: &str, unit: Unit, metric: impl Metric) {
        self.registry().register_with_unit(name, help, unit, metric);
    }

    /// Adds series computed at each scrape (such as [`PoolCollector`]).
    pub fn register_collector(&self, collector: impl Collector) {
        self.registry().register_collector(Box::new(collector));
    }

    pub fn http(&self) -> &HttpMetrics {
        &self.inner.http
    }

    /// Every registered series in the OpenMetrics text format ([`CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry()) {
            // Writing to a String cannot fail; a metric's encoder could, and then the
            // scrape says so rather than serving half a page.
            tracing::error!(%error, "cannot encode the metrics");
            return "# EOF\n".to_owned();
        }
        text
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.inner
            .registry
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The database pool's connections, read at each scrape.
pub struct PoolCollector(pub Db);

impl std::fmt::Debug for PoolCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PoolCollector")
    }
}

impl Collector for PoolCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let pool = self.0.pool();
        let gauges = [
            (
                "db_pool_connections",
                "Database connections open in the pool, busy or idle",
                i64::from(pool.size()),
            ),
            (
                "db_pool_idle_connections",
                "Database connections open in the pool and not in use",
                i64::try_from(pool.num_idle()).unwrap_or(i64::MAX),
            ),
            (
                "db_pool_max_connections",
                "Most database connections the pool will open",
                i64::from(pool.options().get_max_connections()),
            ),
        ];
        for (name, help, value) in gauges {
            let gauge = ConstGauge::new(value);
            let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
}

/// `2xx`, `4xx`…: a status reduced to its class, a bounded label.
pub fn status_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        500..=599 => "5xx",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_get_the_prefix_and_counters_their_total() {
        let metrics = Metrics::new();
        let counter: Counter = Counter::default();
        metrics.register("test_things", "Things counted in a test", counter.clone());
        counter.inc_by(3);
        metrics
            .http()
            .duration
            .get_or_create(&RouteLabels {
                method: "GET",
                route: "/x".to_owned(),
            })
            .observe(0.2);
        let text = metrics.render();
        assert!(text.contains("\nmaitred_test_things_total 3\n"), "{text}");
        assert!(
            text.contains("# TYPE maitred_http_request_duration_seconds histogram"),
            "{text}"
        );
        assert!(
            text.contains(
                "maitred_http_request_duration_seconds_bucket{le=\"0.25\",method=\"GET\",route=\"/x\"} 1\n"
            ),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn registries_are_separate() {
        let a = Metrics::new();
        let b = Metrics::new();
        a.http().in_flight.inc();
        assert!(a.render().contains("maitred_http_requests_in_flight 1\n"));
        assert!(b.render().contains("maitred_http_requests_in_flight 0\n"));
    }
}
