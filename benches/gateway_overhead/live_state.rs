//! Live state in Redis beside live state in process: the same gateway, the same
//! upstream, started once without and once with `MAITRED_REDIS_URL` (a private
//! Redis this benchmark starts). For each: time to first token one stream at a time,
//! a burst of questions started at once, the gateway's CPU per answer (from
//! `/proc/<pid>/stat`), and Redis's commands and CPU per answer.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::measure::{FRAGMENTS, Path, Samples, percentile, round};
use crate::processes::{Commands, Redis, Stack, cpu_time, rss_kib};
use crate::{Options, no_tools};

/// What one run of answers cost.
struct Cost {
    answers: usize,
    gateway_cpu: Duration,
    redis_cpu: Duration,
    commands: Commands,
}

/// Measures the gateway's and Redis's CPU, and Redis's commands, around `run`, which
/// gives how many answers it got.
async fn cost<F>(gateway: u32, redis: &Redis, run: F) -> anyhow::Result<Cost>
where
    F: Future<Output = anyhow::Result<usize>>,
{
    let (cpu, redis_cpu, commands) = (
        cpu_time(gateway)?,
        cpu_time(redis.pid)?,
        redis.commands().await?,
    );
    let answers = run.await?;
    Ok(Cost {
        answers,
        gateway_cpu: cpu_time(gateway)? - cpu,
        redis_cpu: cpu_time(redis.pid)? - redis_cpu,
        commands: redis.commands().await?.since(&commands),
    })
}

impl Cost {
    fn per_answer(&self, value: f64) -> f64 {
        value / self.answers.max(1) as f64
    }

    fn row(&self, mode: &str, run: &str) -> String {
        format!(
            "| {mode} | {run} | {} | {:.2} | {:.2} | {:.1} |",
            self.answers,
            self.per_answer(self.gateway_cpu.as_secs_f64() * 1000.0),
            self.per_answer(self.redis_cpu.as_secs_f64() * 1000.0),
            self.per_answer(self.commands.total as f64),
        )
    }
}

/// One mode's figures.
struct Mode {
    name: &'static str,
    straight: Samples,
    through: Samples,
    sequential: Cost,
    /// 100 streams at once, `rounds` times.
    hundred_straight: Samples,
    hundred_through: Samples,
    burst_straight: Samples,
    burst_through: Samples,
    burst: Cost,
    /// The gateway's RSS once idle after every answer above, and their number.
    rss_after: (usize, u64),
    /// Answers whose upstream sends its fragments back to back, one at a time.
    back_to_back: Cost,
}

pub(crate) async fn live_state(stack: &mut Stack, options: &Options) -> anyhow::Result<()> {
    let running = stack.children.len();
    let redis = stack.redis().await?;
    let fragments: Vec<String> = (0..FRAGMENTS).map(|i| format!("word{i} ")).collect();
    let upstream = stack
        .upstream(
            "paced-live",
            &json!({ "repeat": { "fragments": fragments, "paced_ms": options.pace_ms } }),
        )
        .await?;
    let token: Arc<str> = stack.token().await?.into();
    let http = maitred::http_client::streaming()?;
    let fast = stack
        .upstream(
            "fast-live",
            &json!({ "repeat": { "fragments": fragments } }),
        )
        .await?;
    let straight = Path::Upstream(upstream.clone());

    let mut modes = Vec::new();
    for (name, env) in [
        ("in process", vec![]),
        ("Redis", vec![("MAITRED_REDIS_URL", redis.url.as_str())]),
    ] {
        let before = stack.children.len();
        let file = format!("gateway-live-{}", modes.len());
        let (port, pid) = stack.gateway(&file, &upstream, &no_tools(), &env).await?;
        let through = Path::Gateway {
            url: format!("http://127.0.0.1:{port}"),
            token: token.clone(),
        };
        // Warm both paths: connections, the JWKS cache, SQLite's pages, Redis's scripts.
        let mut warm = Samples::default();
        for _ in 0..2 {
            round(&http, &straight, 4, &mut warm).await?;
            round(&http, &through, 4, &mut warm).await?;
        }

        // One stream at a time, the paths taking turns; the cost is the whole run's,
        // the gateway's idle time while the upstream is asked directly included.
        let (mut one_straight, mut one_through) = (Samples::default(), Samples::default());
        let sequential = cost(pid, &redis, async {
            for _ in 0..options.streams {
                round(&http, &straight, 1, &mut one_straight).await?;
                round(&http, &through, 1, &mut one_through).await?;
            }
            Ok(options.streams)
        })
        .await?;

        let (mut hundred_straight, mut hundred_through) = (Samples::default(), Samples::default());
        for _ in 0..options.rounds {
            round(&http, &straight, 100, &mut hundred_straight).await?;
            round(&http, &through, 100, &mut hundred_through).await?;
        }

        let mut burst_straight = Samples::default();
        round(&http, &straight, options.burst, &mut burst_straight).await?;
        // Let the upstream's and the client's connections settle before the next burst.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut burst_through = Samples::default();
        let burst = cost(pid, &redis, async {
            round(&http, &through, options.burst, &mut burst_through).await?;
            Ok(options.burst)
        })
        .await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let answers = 8 + options.streams + 100 * options.rounds + options.burst;
        let rss_after = (answers, rss_kib(pid)?);
        stack.stop_from(before).await;

        // The same answers with no pause between fragments: the gateway's own cost
        // with nothing waiting on the upstream's pace.
        let file = format!("gateway-live-fast-{}", modes.len());
        let (port, pid) = stack.gateway(&file, &fast, &no_tools(), &env).await?;
        let through = Path::Gateway {
            url: format!("http://127.0.0.1:{port}"),
            token: token.clone(),
        };
        let mut fast_through = Samples::default();
        round(&http, &through, 4, &mut fast_through).await?;
        let back_to_back = cost(pid, &redis, async {
            for _ in 0..options.streams {
                round(&http, &through, 1, &mut fast_through).await?;
            }
            Ok(options.streams)
        })
        .await?;
        stack.stop_from(before).await;
        modes.push(Mode {
            name,
            straight: one_straight,
            through: one_through,
            sequential,
            hundred_straight,
            hundred_through,
            burst_straight,
            burst_through,
            burst,
            rss_after,
            back_to_back,
        });
    }
    report(&modes, options);
    stack.stop_from(running).await;
    Ok(())
}

fn report(modes: &[Mode], options: &Options) {
    let ms = |s: &Samples, p| percentile(&s.first, p);
    println!("\n## Live state in Redis vs in process\n");
    println!(
        "### Time to first token ({FRAGMENTS} fragments {} ms apart; at 1, {} streams per path one after the other, at 100, {} rounds of 100 at once)\n",
        options.pace_ms, options.streams, options.rounds
    );
    println!(
        "| live state | concurrent streams | streams | upstream p50 ms | gateway p50 ms | added p50 ms | upstream p99 ms | gateway p99 ms | added p99 ms | gap added p99 ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (concurrency, pick) in [
        (
            1,
            (|m: &Mode| (&m.straight, &m.through)) as fn(&Mode) -> (&Samples, &Samples),
        ),
        (100, |m: &Mode| (&m.hundred_straight, &m.hundred_through)),
    ] {
        for mode in modes {
            let (a, b) = pick(mode);
            println!(
                "| {} | {concurrency} | {} | {:.2} | {:.2} | {:+.2} | {:.2} | {:.2} | {:+.2} | {:+.2} |",
                mode.name,
                b.first.len(),
                ms(a, 0.5),
                ms(b, 0.5),
                ms(b, 0.5) - ms(a, 0.5),
                ms(a, 0.99),
                ms(b, 0.99),
                ms(b, 0.99) - ms(a, 0.99),
                percentile(&b.gaps, 0.99) - percentile(&a.gaps, 0.99),
            );
        }
    }

    println!(
        "\n### Burst: {} questions started at once, time to first token\n",
        options.burst
    );
    println!(
        "| live state | path | streams | complete | TTFT p50 ms | TTFT p99 ms | TTFT max ms | gap p99 ms |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for mode in modes {
        for (path, s) in [
            ("upstream directly", &mode.burst_straight),
            ("through the gateway", &mode.burst_through),
        ] {
            println!(
                "| {} | {path} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} |",
                mode.name,
                s.first.len(),
                s.first.len() - s.short,
                ms(s, 0.5),
                ms(s, 0.99),
                ms(s, 1.0),
                percentile(&s.gaps, 0.99),
            );
        }
    }

    println!("\n### Cost per answer\n");
    println!(
        "CPU is `utime + stime` from `/proc/<pid>/stat` over the run, divided by the answers. Redis commands are from `INFO commandstats`, which counts the commands a Lua script runs besides the `EVALSHA` itself.\n"
    );
    println!(
        "| live state | run ({FRAGMENTS} fragments) | answers | gateway CPU ms/answer | Redis CPU ms/answer | Redis commands/answer |"
    );
    println!("|---|---|---|---|---|---|");
    for mode in modes {
        println!("{}", mode.sequential.row(mode.name, "one at a time"));
        println!("{}", mode.burst.row(mode.name, "burst"));
        println!(
            "{}",
            mode.back_to_back
                .row(mode.name, "back to back, one at a time")
        );
    }

    println!("\n### Gateway memory after the answers above, idle\n");
    println!("| live state | answers | RSS MiB |");
    println!("|---|---|---|");
    for mode in modes {
        let (answers, kib) = mode.rss_after;
        println!("| {} | {answers} | {:.1} |", mode.name, kib as f64 / 1024.0);
    }

    if let Some(redis) = modes.iter().find(|m| m.sequential.commands.total > 0) {
        println!("\n### Redis commands per answer, by command\n");
        println!("| command | one at a time | burst | back to back |");
        println!("|---|---|---|---|");
        let count = |cost: &Cost, name: &str| {
            cost.per_answer(
                cost.commands
                    .by_name
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(0.0, |(_, n)| *n as f64),
            )
        };
        let mut names: Vec<&str> = Vec::new();
        for (name, _) in redis
            .sequential
            .commands
            .by_name
            .iter()
            .chain(&redis.burst.commands.by_name)
            .chain(&redis.back_to_back.commands.by_name)
        {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
        for name in names {
            println!(
                "| {name} | {:.2} | {:.2} | {:.2} |",
                count(&redis.sequential, name),
                count(&redis.burst, name),
                count(&redis.back_to_back, name)
            );
        }
    }
}
