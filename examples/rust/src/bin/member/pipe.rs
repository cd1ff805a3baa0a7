//! The pipeline of a leading member (`--pipe-from`): Kafka's
//! read-process-write loop under the term's epoch. It resumes where the
//! consumer group's offsets were last committed, reads the input's
//! partition 0 with the term's [`InputReader`], and writes one output record
//! per input record to partition 0 of `--pipe-to`, committing the input
//! offsets in the same guarded transaction
//! ([`Leadership::write_with_offsets`]). Each output's value is a JSON
//! object with the input's offset (`in_offset`, and as `seq`, the field the
//! guarded records of `--data-topic` number themselves with) and value
//! (`in_value`), the writer's member id and token (`producer_id`, `epoch`),
//! so a read_committed reader of the output can check that every
//! input appears exactly once, in input order, under tokens that never go
//! back.
//!
//! Lines: `pipe_resumed` (`offset`: where reading starts, and the term's
//! `token`), `pipe_write` (`first`, `last`: the input offsets written,
//! `count`, `next`: the input position committed with them, `result` =
//! `ok`, `fenced` or `error`, and the token), `pipe_error` (a read or
//! resume failure, error fields).

use std::sync::Arc;
use std::time::Duration;

use krabka_coordination::input::{InputOptions, InputReader, InputRecord, Reset};
use krabka_coordination::leadership::Leadership;
use krabka_coordination::transport::kafka::KafkaClient;
use krabka_coordination::transport::{ConsumedOffsets, InputOffset, OutRecord};
use krabka_coordination::{Error, ErrorKind};
use krabka_examples::lines::{error_fields, Lines};
use serde_json::{json, Value};

/// What a pipeline member reads and writes.
#[derive(Debug, Clone)]
pub struct Pipe {
    /// The input topic (its partition 0 is read).
    pub from: String,
    /// The output topic (its partition 0 is written).
    pub to: String,
    /// The consumer group whose offsets are committed with the outputs.
    pub group: String,
    /// The most input records whose outputs go in one transaction.
    pub batch: usize,
}

/// Runs the pipeline while the term lasts (see the module docs).
pub async fn pipe_loop(
    lines: Arc<Lines>,
    leadership: Arc<Leadership>,
    kafka: KafkaClient,
    pipe: Pipe,
) {
    let options = InputOptions::default().with_max_wait(Duration::from_millis(200));
    let partitions = [(pipe.from.clone(), vec![0])];
    let resumed = InputReader::resume(
        &kafka,
        Arc::clone(&leadership),
        &pipe.group,
        &partitions,
        Reset::Earliest,
        options,
    )
    .await;
    let mut reader = match resumed {
        Ok(r) => r,
        Err(e) => return pipe_error(&lines, "resume", &e),
    };
    let mut committed = reader.positions()[0].offset;
    lines.emit(
        "pipe_resumed",
        json!({"offset": committed, "token": leadership.token().to_string()}),
    );
    loop {
        let records = match reader.next_batch().await {
            Ok(r) => r,
            Err(e) if ended(&e) || !leadership.is_held() => return,
            Err(e) => {
                pipe_error(&lines, "read", &e);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let done = records.len();
        for (i, chunk) in records.chunks(pipe.batch).enumerate() {
            // The chunk's last input, plus one; the whole batch's last
            // chunk commits the reader's positions (past markers too).
            let last_chunk = (i + 1) * pipe.batch >= done;
            let next = if last_chunk {
                reader.positions()[0].offset
            } else {
                chunk[chunk.len() - 1].offset + 1
            };
            match write_chunk(&lines, &leadership, &pipe, chunk, next).await {
                Written::Ok => committed = next,
                Written::Stop => return,
                Written::Failed => {
                    // Nothing of the failed write committed: read its
                    // inputs again from the last committed position.
                    if let Err(e) = reader.seek(&pipe.from, 0, committed) {
                        if !ended(&e) {
                            pipe_error(&lines, "seek", &e);
                        }
                        return;
                    }
                    break;
                }
            }
        }
    }
}

/// How one chunk's write ended.
enum Written {
    /// Committed.
    Ok,
    /// Failed, the term goes on: read the chunk again.
    Failed,
    /// The term ended (fenced, resigned, expired).
    Stop,
}

async fn write_chunk(
    lines: &Lines,
    leadership: &Leadership,
    pipe: &Pipe,
    chunk: &[InputRecord],
    next: i64,
) -> Written {
    let token = leadership.token();
    let member = leadership.member().to_owned();
    let outputs = chunk
        .iter()
        .map(|r| OutRecord {
            topic: pipe.to.clone(),
            partition: Some(0),
            key: r.key.clone(),
            value: Some(
                json!({
                    "seq": r.offset,
                    "in_offset": r.offset,
                    "in_value": r.value.as_deref().map(String::from_utf8_lossy),
                    "member": member,
                    "producer_id": token.producer_id,
                    "epoch": token.producer_epoch,
                })
                .to_string()
                .into_bytes(),
            ),
            headers: Vec::new(),
        })
        .collect();
    let offsets = ConsumedOffsets::new(
        pipe.group.clone(),
        vec![InputOffset::new(pipe.from.clone(), 0, next)],
    );
    let (first, last) = (chunk[0].offset, chunk[chunk.len() - 1].offset);
    let mut fields = json!({
        "first": first,
        "last": last,
        "count": chunk.len(),
        "next": next,
        "token": token.to_string(),
    });
    let outcome = leadership.write_with_offsets(outputs, offsets).await;
    let (result, written) = match &outcome {
        Ok(()) => ("ok", Written::Ok),
        Err(e) if e.kind() == ErrorKind::Fenced => ("fenced", Written::Stop),
        Err(e) if ended(e) => return Written::Stop,
        Err(_) => ("error", Written::Failed),
    };
    fields["result"] = json!(result);
    if let Err(e) = &outcome {
        for (k, v) in error_fields(e) {
            fields[k] = v;
        }
    }
    lines.emit("pipe_write", fields);
    if matches!(written, Written::Failed) && !leadership.is_held() {
        return Written::Stop;
    }
    written
}

/// Whether `e` says the term ended (the reader and writes refuse from then
/// on).
fn ended(e: &Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Resigned | ErrorKind::LeaseExpired | ErrorKind::Fenced
    )
}

fn pipe_error(lines: &Lines, during: &str, e: &Error) {
    let mut f = error_fields(e);
    f.insert("during".into(), Value::from(during));
    lines.emit("pipe_error", Value::Object(f));
}
