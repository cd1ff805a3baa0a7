//! `describe_leadership` through one `KafkaClient`: latency of
//! sequential calls, then requests per second with `--describe-concurrency`
//! calls in flight. A third party needs only the narrow `Describer` seam.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use krabka_coordination::leadership::describe_leadership;
use krabka_coordination::transport::kafka::{KafkaClient, KafkaConfig, KafkaTransport};
use krabka_coordination::transport::{Coordinator, Describer};
use krabka_coordination::{FencingToken, Result};
use krabka_examples::now_ms;
use serde_json::{json, Value};

use crate::stats::{ms, stat_line, stats};
use crate::Args;

/// A third party's describer: a `KafkaClient` and nothing that mints.
#[derive(Clone)]
struct DescribeOnly(KafkaClient);

#[async_trait]
impl Describer for DescribeOnly {
    async fn describe_epoch(&self, role: &str) -> Result<FencingToken> {
        self.0.describe_epoch(role).await
    }
}

async fn timed_calls(
    d: &DescribeOnly,
    role: &str,
    n: usize,
) -> std::result::Result<Vec<f64>, String> {
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        describe_leadership(d, role)
            .await
            .map_err(|e| e.to_string())?;
        lat.push(ms(t0.elapsed()));
    }
    Ok(lat)
}

/// The describe benchmark.
pub async fn describe(a: &Args, config: &KafkaConfig) -> std::result::Result<Value, String> {
    let role = format!("bench-describe-{}", now_ms());
    // Give the role an epoch, so each describe returns a real description;
    // the held epoch lives until the end of the run.
    let t =
        KafkaTransport::new(config.clone(), Some("bench-describe")).map_err(|e| e.to_string())?;
    let epoch = t
        .acquire_epoch(&role, Duration::from_millis(a.lease_ms))
        .await
        .map_err(|e| e.to_string())?;
    let token = epoch.token();
    let client = KafkaClient::new(config).map_err(|e| e.to_string())?;
    let coord = DescribeOnly(client.clone());
    // Warm up: connection, ApiVersions, FindCoordinator.
    for _ in 0..50 {
        let s = describe_leadership(&coord, &role)
            .await
            .map_err(|e| e.to_string())?;
        if s.token != token {
            return Err(format!(
                "describe says {} but the minted token is {token}",
                s.token
            ));
        }
    }
    let before = client.requests_sent();
    let started = Instant::now();
    let lat = timed_calls(&coord, &role, a.describe_requests).await?;
    let seq_elapsed = started.elapsed();
    let per_call = (client.requests_sent() - before) as f64 / a.describe_requests as f64;
    // Throughput with many calls in flight on the same client.
    let total = a.describe_requests.max(a.describe_concurrency * 100);
    let per_task = total / a.describe_concurrency;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..a.describe_concurrency {
        let (c, role) = (coord.clone(), role.clone());
        tasks.push(tokio::spawn(async move {
            timed_calls(&c, &role, per_task).await
        }));
    }
    let mut conc_lat = Vec::new();
    for t in tasks {
        conc_lat.extend(t.await.map_err(|e| e.to_string())??);
    }
    let conc_elapsed = started.elapsed();
    let seq_rps = a.describe_requests as f64 / seq_elapsed.as_secs_f64();
    let conc_rps = conc_lat.len() as f64 / conc_elapsed.as_secs_f64();
    println!(
        "describe_leadership ({} sequential, then {} with {} in flight)",
        a.describe_requests,
        conc_lat.len(),
        a.describe_concurrency
    );
    println!("{}", stat_line("sequential latency", &lat));
    println!(
        "  {:<34} {seq_rps:.0} requests/s, {per_call:.2} Kafka requests per call",
        "sequential throughput"
    );
    let in_flight = format!("{} in flight", a.describe_concurrency);
    println!("{}", stat_line(&format!("latency, {in_flight}"), &conc_lat));
    println!(
        "  {:<34} {conc_rps:.0} requests/s",
        format!("throughput, {in_flight}")
    );
    drop(epoch);
    Ok(json!({
        "sequential": stats(&lat),
        "sequential_rps": seq_rps,
        "kafka_requests_per_call": per_call,
        "concurrent": stats(&conc_lat),
        "concurrency": a.describe_concurrency,
        "concurrent_rps": conc_rps,
    }))
}
