//! The loop of `eos-pipe` (see the binary's docs).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use krabka_coordination::client::Client;
use krabka_coordination::input::{start_positions, InputOptions, InputReader, InputRecord, Reset};
use krabka_coordination::transport::kafka::{KafkaConfig, TopicSpec};
use krabka_coordination::transport::{ConsumedOffsets, InputOffset, OutRecord};
use krabka_coordination::Result;
use serde_json::json;

use crate::Args;

/// Runs the loop; returns the JSON line to print.
pub async fn pipe(args: &Args) -> Result<String> {
    let start = Instant::now();
    let config = KafkaConfig::new(args.bootstrap.clone()).set("client.id", "krabka-eos-pipe");
    let client = Client::new(config)?;
    client.ensure_state_topic(TopicSpec::default()).await?;
    let leadership = Arc::new(
        client
            .acquire(&args.role, "eos-pipe", client.leadership_options())
            .await?,
    );
    let kafka = client.kafka_client()?.clone();
    let partitions = [(args.input.clone(), (0..args.partitions).collect::<Vec<_>>())];
    let options = InputOptions::default().with_max_wait(Duration::from_millis(100));
    let mut reader = InputReader::resume(
        &kafka,
        Arc::clone(&leadership),
        &args.group,
        &partitions,
        Reset::Earliest,
        options,
    )
    .await?;
    let assigned: Vec<(String, i32, Option<i64>)> = (0..args.partitions)
        .map(|p| (args.input.clone(), p, None))
        .collect();
    let ends: Vec<i64> = start_positions(&kafka, &assigned, Reset::Latest, Duration::from_secs(30))
        .await?
        .into_iter()
        .map(|p| p.offset)
        .collect();
    let loop_start = Instant::now();
    let mut pending: VecDeque<InputRecord> = VecDeque::new();
    let mut txn_times = Vec::new();
    let mut piped = 0u64;
    loop {
        while pending.len() < args.batch && !consumed_all(&reader, &ends) {
            pending.extend(reader.next_batch().await?);
        }
        if pending.is_empty() {
            break;
        }
        let t0 = Instant::now();
        let take = args.batch.min(pending.len());
        let chunk: Vec<InputRecord> = pending.drain(..take).collect();
        leadership
            .write_with_offsets(outputs(args, &chunk), offsets(args, &chunk))
            .await?;
        txn_times.push(t0.elapsed());
        piped += chunk.len() as u64;
    }
    let loop_time = loop_start.elapsed();
    leadership.resign().await?;
    Ok(report(
        args.batch,
        piped,
        txn_times,
        loop_start - start,
        loop_time,
    ))
}

/// Whether the reader's position reached `ends` in every partition.
fn consumed_all(reader: &InputReader, ends: &[i64]) -> bool {
    reader
        .positions()
        .iter()
        .zip(ends)
        .all(|(p, end)| p.offset >= *end)
}

/// One output per input: same key, value "<value>:piped", the input's
/// partition number.
fn outputs(args: &Args, chunk: &[InputRecord]) -> Vec<OutRecord> {
    chunk
        .iter()
        .map(|r| {
            let mut value = r.value.clone().unwrap_or_default();
            value.extend_from_slice(b":piped");
            OutRecord {
                topic: args.output.clone(),
                partition: Some(r.partition),
                key: r.key.clone(),
                value: Some(value),
                headers: Vec::new(),
            }
        })
        .collect()
}

/// The offsets consumed by `chunk`: each partition's last record, plus one.
fn offsets(args: &Args, chunk: &[InputRecord]) -> ConsumedOffsets {
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    for r in chunk {
        next.insert(r.partition, r.offset + 1);
    }
    let offsets = next
        .into_iter()
        .map(|(p, o)| InputOffset::new(args.input.clone(), p, o))
        .collect();
    ConsumedOffsets::new(args.group.clone(), offsets)
}

fn report(
    batch: usize,
    piped: u64,
    mut txns: Vec<Duration>,
    setup: Duration,
    looped: Duration,
) -> String {
    txns.sort();
    let quantile = |q: f64| -> f64 {
        if txns.is_empty() {
            return 0.0;
        }
        let rank = (q * txns.len() as f64).ceil() as usize;
        txns[rank.clamp(1, txns.len()) - 1].as_secs_f64() * 1e3
    };
    let secs = looped.as_secs_f64();
    json!({
        "client": "krabka",
        "batch": batch,
        "records": piped,
        "transactions": txns.len(),
        "setup_ms": round1(setup.as_secs_f64() * 1e3),
        "loop_ms": round1(secs * 1e3),
        "records_per_s": if secs > 0.0 { (piped as f64 / secs).round() } else { 0.0 },
        "txn_p50_ms": round2(quantile(0.50)),
        "txn_p99_ms": round2(quantile(0.99)),
    })
    .to_string()
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}
