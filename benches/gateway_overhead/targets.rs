//! The performance table: every row in one run, in process and with Redis, the
//! upstream asked directly as the baseline.
//!
//! - time to first token added, one stream at a time (a question every ~1.3 s, the
//!   paths taking turns) and 100 streams at once;
//! - the gateway's CPU per 64-fragment answer, with fragments 20 ms apart and back to
//!   back: the gateway's threads' time on a CPU (`schedstat`) from sending the
//!   question to reading `done`, so its idle time between questions is not counted;
//! - memory per open, idle answer (1,000 open, the upstream never answering);
//! - RSS after 400 answers, idle.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::json;

use crate::measure::{FRAGMENTS, Path, Samples, percentile, round};
use crate::overhead::open_idle;
use crate::processes::{Stack, cpu_ns, rss_kib};
use crate::{Options, no_tools};

/// Answers counted for the RSS row, as in the target.
const RSS_ANSWERS: usize = 400;
/// Streams held open for the memory row.
const OPEN: usize = 1000;

#[derive(Default)]
struct Figures {
    one: (Samples, Samples),
    hundred: (Samples, Samples),
    /// Nanoseconds of gateway CPU per answer.
    paced_cpu: Vec<u64>,
    fast_cpu: Vec<u64>,
    /// The scripted upstream's own CPU per paced answer it streamed straight to the
    /// client: a process that only waits for a timer and writes each fragment.
    upstream_cpu: Vec<u64>,
    /// KiB per open answer.
    open_kib: f64,
    /// Nanoseconds of gateway CPU per answer opened (question to the upstream's
    /// headers), the work a burst of questions queues on the cores.
    open_cpu: u64,
    /// KiB after `RSS_ANSWERS` answers, idle.
    rss_after: u64,
}

pub(crate) async fn targets(stack: &mut Stack, options: &Options) -> anyhow::Result<()> {
    let running = stack.children.len();
    let redis = stack.redis().await?;
    let fragments: Vec<String> = (0..FRAGMENTS).map(|i| format!("word{i} ")).collect();
    let paced = stack
        .upstream(
            "targets-paced",
            &json!({ "repeat": { "fragments": fragments, "paced_ms": options.pace_ms } }),
        )
        .await?;
    let paced_pid = stack
        .children
        .last()
        .and_then(tokio::process::Child::id)
        .context("the upstream's pid")?;
    let fast = stack
        .upstream(
            "targets-fast",
            &json!({ "repeat": { "fragments": fragments } }),
        )
        .await?;
    let hang = stack
        .upstream("targets-hang", &json!({ "repeat": { "hang": true } }))
        .await?;
    let token: Arc<str> = stack.token().await?.into();
    let http = maitred::http_client::streaming()?;

    let mut modes = Vec::new();
    for (name, env) in [
        ("in process", vec![]),
        ("Redis", vec![("MAITRED_REDIS_URL", redis.url.as_str())]),
    ] {
        let mut figures = Figures::default();
        let before = stack.children.len();

        // Fragments at the upstream's pace: time to first token and CPU per answer.
        let (port, pid) = stack
            .gateway(&format!("targets-paced-{name}"), &paced, &no_tools(), &env)
            .await?;
        let through = gateway_path(port, &token);
        let straight = Path::Upstream(paced.clone());
        warm(&http, &straight, &through).await?;
        for _ in 0..options.streams {
            let upstream_cpu = cpu_ns(paced_pid)?;
            round(&http, &straight, 1, &mut figures.one.0).await?;
            figures.upstream_cpu.push(cpu_ns(paced_pid)? - upstream_cpu);
            let cpu = cpu_ns(pid)?;
            round(&http, &through, 1, &mut figures.one.1).await?;
            figures.paced_cpu.push(cpu_ns(pid)? - cpu);
        }
        for _ in 0..options.rounds {
            round(&http, &straight, 100, &mut figures.hundred.0).await?;
            round(&http, &through, 100, &mut figures.hundred.1).await?;
        }
        stack.stop_from(before).await;

        // Fragments back to back: CPU per answer, then RSS after 400 answers.
        let (port, pid) = stack
            .gateway(&format!("targets-fast-{name}"), &fast, &no_tools(), &env)
            .await?;
        let through = gateway_path(port, &token);
        let mut samples = Samples::default();
        round(&http, &through, 4, &mut samples).await?;
        for _ in 0..options.streams {
            let cpu = cpu_ns(pid)?;
            round(&http, &through, 1, &mut samples).await?;
            figures.fast_cpu.push(cpu_ns(pid)? - cpu);
        }
        let done = 4 + options.streams;
        for _ in 0..(RSS_ANSWERS - done) / 10 {
            round(&http, &through, 10, &mut samples).await?;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        figures.rss_after = rss_kib(pid)?;
        stack.stop_from(before).await;

        // Answers that stay open: the upstream sends its headers and nothing more.
        let (port, pid) = stack
            .gateway(&format!("targets-hang-{name}"), &hang, &no_tools(), &env)
            .await?;
        let url = format!("http://127.0.0.1:{port}");
        drop(open_idle(&http, &url, &token).await?);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let idle = rss_kib(pid)?;
        let cpu = cpu_ns(pid)?;
        let mut open = Vec::with_capacity(OPEN);
        for _ in 0..OPEN / 100 {
            let batch =
                futures::future::try_join_all((0..100).map(|_| open_idle(&http, &url, &token)))
                    .await?;
            open.extend(batch);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        figures.open_kib = rss_kib(pid)?.saturating_sub(idle) as f64 / OPEN as f64;
        figures.open_cpu = (cpu_ns(pid)? - cpu) / OPEN as u64;
        drop(open);
        stack.stop_from(before).await;
        modes.push((name, figures));
    }
    report(&modes, options);
    stack.stop_from(running).await;
    Ok(())
}

fn gateway_path(port: u16, token: &Arc<str>) -> Path {
    Path::Gateway {
        url: format!("http://127.0.0.1:{port}"),
        token: token.clone(),
    }
}

/// Connections, the JWKS cache, SQLite's pages and Redis's scripts, warmed on both paths.
async fn warm(http: &reqwest::Client, straight: &Path, through: &Path) -> anyhow::Result<()> {
    let mut samples = Samples::default();
    for _ in 0..2 {
        round(http, straight, 4, &mut samples).await?;
        round(http, through, 4, &mut samples).await?;
    }
    Ok(())
}

fn median_ms(nanos: &[u64]) -> f64 {
    let mut sorted = nanos.to_vec();
    sorted.sort_unstable();
    sorted
        .get(sorted.len() / 2)
        .map_or(f64::NAN, |n| *n as f64 / 1e6)
}

fn mean_ms(nanos: &[u64]) -> f64 {
    nanos.iter().sum::<u64>() as f64 / nanos.len().max(1) as f64 / 1e6
}

fn report(modes: &[(&str, Figures)], options: &Options) {
    let added = |(a, b): &(Samples, Samples), p| percentile(&b.first, p) - percentile(&a.first, p);
    println!("\n## The performance table\n");
    println!(
        "{FRAGMENTS} fragments; one stream: {} questions per path, taking turns; 100 streams: {} rounds. CPU: the gateway's threads' time on a CPU (`/proc/<pid>/task/*/schedstat`) from the question to `done`, mean (median) over {} answers.\n",
        options.streams, options.rounds, options.streams
    );
    let names: Vec<&str> = modes.iter().map(|(n, _)| *n).collect();
    println!("| | {} |", names.join(" | "));
    println!("|---|{}", "---|".repeat(modes.len()));
    let line = |what: String, cell: &dyn Fn(&Figures) -> String| {
        let cells: Vec<String> = modes.iter().map(|(_, f)| cell(f)).collect();
        println!("| {what} | {} |", cells.join(" | "));
    };
    line(
        format!(
            "added time to first token, one stream, questions {:.1} s apart (p50 / p99 ms)",
            FRAGMENTS as f64 * options.pace_ms as f64 / 1000.0
        ),
        &|f| format!("{:+.2} / {:+.2}", added(&f.one, 0.5), added(&f.one, 0.99)),
    );
    line(
        "added time to first token, 100 streams (p50 / p99 ms)".to_owned(),
        &|f| {
            format!(
                "{:+.2} / {:+.2}",
                added(&f.hundred, 0.5),
                added(&f.hundred, 0.99)
            )
        },
    );
    line(
        format!(
            "CPU per {FRAGMENTS}-fragment answer, fragments {} ms apart (ms)",
            options.pace_ms
        ),
        &|f| {
            format!(
                "{:.2} ({:.2})",
                mean_ms(&f.paced_cpu),
                median_ms(&f.paced_cpu)
            )
        },
    );
    line(
        format!(
            "for scale: the upstream's own CPU per {FRAGMENTS}-fragment answer streamed straight to the client, {} ms apart (ms)",
            options.pace_ms
        ),
        &|f| {
            format!(
                "{:.2} ({:.2})",
                mean_ms(&f.upstream_cpu),
                median_ms(&f.upstream_cpu)
            )
        },
    );
    line(
        format!("CPU per {FRAGMENTS}-fragment answer, fragments back to back (ms)"),
        &|f| {
            format!(
                "{:.2} ({:.2})",
                mean_ms(&f.fast_cpu),
                median_ms(&f.fast_cpu)
            )
        },
    );
    line(
        format!("memory per open, idle answer ({OPEN} open, KiB)"),
        &|f| format!("{:.1}", f.open_kib),
    );
    line(
        format!(
            "for scale: the gateway's CPU to open one answer, question to the upstream's headers ({OPEN} opened 100 at a time, µs)"
        ),
        &|f| format!("{:.0}", f.open_cpu as f64 / 1e3),
    );
    line(
        format!("RSS after {RSS_ANSWERS} answers, idle (MiB)"),
        &|f| format!("{:.1}", f.rss_after as f64 / 1024.0),
    );
}
