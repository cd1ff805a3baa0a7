//! The guarded writes of a leading member.

use std::sync::Arc;
use std::time::Duration;

use krabka_coordination::leadership::Leadership;
use krabka_coordination::transport::OutRecord;
use krabka_coordination::ErrorKind;
use krabka_examples::lines::{error_fields, Lines};
use krabka_examples::now_ms;
use serde_json::{json, Value};

/// Writes one guarded record every `every` to partition 0 of `topic` while
/// the role is held, each in its own transaction of the term's epoch. The
/// value is a JSON object with the member id, its token (`producer_id`,
/// `epoch`) and a sequence number, so a reader of the topic can check that
/// every committed record carries the token of its writer. Prints a
/// `guarded_write` line per write (`result` = `ok`, `fenced` or `error`).
pub async fn write_loop(
    lines: Arc<Lines>,
    leadership: Arc<Leadership>,
    topic: String,
    every: Duration,
) {
    let token = leadership.token();
    let member = leadership.member().to_owned();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seq: u64 = 0;
    loop {
        tick.tick().await;
        if !leadership.is_held() {
            return;
        }
        seq += 1;
        let value = json!({
            "member": member,
            "producer_id": token.producer_id,
            "epoch": token.producer_epoch,
            "seq": seq,
            "t_ms": now_ms(),
        });
        let record = OutRecord {
            topic: topic.clone(),
            partition: Some(0),
            key: Some(member.as_bytes().to_vec()),
            value: Some(value.to_string().into_bytes()),
            headers: Vec::new(),
        };
        match leadership.write(vec![record]).await {
            Ok(()) => lines.emit(
                "guarded_write",
                json!({"seq": seq, "result": "ok", "token": token.to_string()}),
            ),
            Err(e) if e.kind() == ErrorKind::Fenced => {
                let mut f = error_fields(&e);
                f.insert("seq".into(), json!(seq));
                f.insert("result".into(), json!("fenced"));
                lines.emit("guarded_write", Value::Object(f));
                return;
            }
            Err(e) if e.kind() == ErrorKind::Resigned => return,
            Err(e) => {
                let mut f = error_fields(&e);
                f.insert("seq".into(), json!(seq));
                f.insert("result".into(), json!("error"));
                lines.emit("guarded_write", Value::Object(f));
                if !leadership.is_held() {
                    return;
                }
            }
        }
    }
}
