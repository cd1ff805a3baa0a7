//! The member's stdout: one JSON object per line.
//!
//! Every line has `event`, `member`, `role` and `t_ms` (epoch milliseconds).
//! The lines of the core's events ([`event_line`]) take their name from
//! [`EventKind::name`] and their `t_ms` from the member's clock at the step;
//! the member adds lines of its own (`start`, `guarded_write`, `resigning`,
//! `status`, `exit`, ...) through [`Lines::emit`].

use std::io::Write;
use std::sync::Mutex;

use krabka_coordination::events::{Event, EventKind};
use krabka_coordination::{Error, FencingToken};
use serde_json::{json, Map, Value};

/// The fields of a token: `producer_id`, `epoch` and `token` (as text).
pub fn token_fields(token: FencingToken) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("producer_id".into(), json!(token.producer_id));
    m.insert("epoch".into(), json!(token.producer_epoch));
    m.insert("token".into(), json!(token.to_string()));
    m
}

/// The fields of an error: `error` (its message) and `kind` (its stable
/// [`krabka_coordination::ErrorKind`] name, which readers match).
pub fn error_fields(error: &Error) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("error".into(), json!(error.to_string()));
    m.insert("kind".into(), json!(error.kind().name()));
    m
}

/// The line name and fields of one core event.
///
/// `registered` (`partition`, `offset`), `waiting` (`rank`,
/// `challenge_at`, and `holder`, `holder_token` behind a lease), `held_back`, `challenging`, `lost_challenge` (token fields),
/// `elected` (token fields, `granted_at`, `deadline`), `renewed`
/// (`deadline`), `renewal_failing` (`failures`, error fields), `fenced`
/// (error fields), `lease_expired`, `ended` (error fields), `resigned` (`cleared`),
/// `deregistered`. A kind this version does not know keeps its name and has
/// no fields.
pub fn event_line(kind: &EventKind) -> (&'static str, Map<String, Value>) {
    let mut m = Map::new();
    match kind {
        EventKind::Registered { partition, offset } => {
            m.insert("partition".into(), json!(partition));
            m.insert("offset".into(), json!(offset));
        }
        EventKind::Waiting {
            rank,
            challenge_at,
            holder,
            holder_token,
        } => {
            m.insert("rank".into(), json!(rank));
            m.insert("challenge_at".into(), json!(challenge_at));
            if let (Some(holder), Some(token)) = (holder, holder_token) {
                m.insert("holder".into(), json!(&**holder));
                m.insert("holder_token".into(), json!(token.to_string()));
            }
        }
        EventKind::LostChallenge { token } => m = token_fields(*token),
        EventKind::Elected {
            token,
            granted_at,
            deadline,
        } => {
            m = token_fields(*token);
            m.insert("granted_at".into(), json!(granted_at));
            m.insert("deadline".into(), json!(deadline));
        }
        EventKind::Renewed { deadline } => {
            m.insert("deadline".into(), json!(deadline));
        }
        EventKind::RenewalFailing { failures, error } => {
            m = error_fields(error);
            m.insert("failures".into(), json!(failures));
        }
        EventKind::Fenced { error } | EventKind::Ended { error } => m = error_fields(error),
        EventKind::Resigned { cleared } => {
            m.insert("cleared".into(), json!(cleared));
        }
        _ => {}
    }
    (kind.name(), m)
}

/// Writes the JSON lines of one member to stdout, one write per line.
#[derive(Debug)]
pub struct Lines {
    member: String,
    role: String,
    lock: Mutex<()>,
}

impl Lines {
    /// The lines of `member` in `role`.
    pub fn new(role: &str, member: &str) -> Lines {
        Lines {
            member: member.to_owned(),
            role: role.to_owned(),
            lock: Mutex::new(()),
        }
    }

    /// The line of `event` with `fields`, stamped `t_ms`.
    pub fn line(&self, event: &str, t_ms: i64, fields: Map<String, Value>) -> Value {
        let mut m = Map::new();
        m.insert("event".into(), json!(event));
        m.insert("member".into(), json!(self.member));
        m.insert("role".into(), json!(self.role));
        m.insert("t_ms".into(), json!(t_ms));
        m.extend(fields);
        Value::Object(m)
    }

    /// Prints a line of the member's own, stamped now. `fields` is a JSON
    /// object (anything else adds no fields).
    pub fn emit(&self, event: &str, fields: Value) {
        let fields = match fields {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        self.print(&self.line(event, crate::now_ms(), fields));
    }

    /// Prints the line of a core event, stamped with the member's clock at
    /// the step, plus `extra` fields.
    pub fn event(&self, event: &Event, extra: Map<String, Value>) {
        let (name, mut fields) = event_line(&event.kind);
        fields.extend(extra);
        self.print(&self.line(name, event.at, fields));
    }

    fn print(&self, line: &Value) {
        let _one_at_a_time = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = std::io::stdout().lock();
        // A reader that went away (the parent died) is no reason to stop.
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn every_event_has_its_name_and_fields() {
        let t = FencingToken::new(7, 2);
        let fenced = Arc::new(Error::Fenced("epoch 3 exists".into()));
        let cases: Vec<(EventKind, &str, Vec<&str>)> = vec![
            (
                EventKind::Registered {
                    partition: 4,
                    offset: 10,
                },
                "registered",
                vec!["partition", "offset"],
            ),
            (
                EventKind::Waiting {
                    rank: 1,
                    challenge_at: 5,
                    holder: None,
                    holder_token: None,
                },
                "waiting",
                vec!["rank", "challenge_at"],
            ),
            (
                EventKind::Waiting {
                    rank: 0,
                    challenge_at: 5,
                    holder: Some("host-a".into()),
                    holder_token: Some(t),
                },
                "waiting",
                vec!["rank", "challenge_at", "holder", "holder_token"],
            ),
            (EventKind::HeldBack, "held_back", vec![]),
            (EventKind::Challenging, "challenging", vec![]),
            (
                EventKind::LostChallenge { token: t },
                "lost_challenge",
                vec!["producer_id", "epoch", "token"],
            ),
            (
                EventKind::Elected {
                    token: t,
                    granted_at: 1,
                    deadline: 2,
                },
                "elected",
                vec!["producer_id", "epoch", "token", "granted_at", "deadline"],
            ),
            (
                EventKind::Renewed { deadline: 9 },
                "renewed",
                vec!["deadline"],
            ),
            (
                EventKind::RenewalFailing {
                    failures: 2,
                    error: fenced.clone(),
                },
                "renewal_failing",
                vec!["failures", "error", "kind"],
            ),
            (
                EventKind::Fenced {
                    error: fenced.clone(),
                },
                "fenced",
                vec!["error", "kind"],
            ),
            (EventKind::LeaseExpired, "lease_expired", vec![]),
            (
                EventKind::Resigned { cleared: true },
                "resigned",
                vec!["cleared"],
            ),
            (EventKind::Deregistered, "deregistered", vec![]),
        ];
        for (kind, name, keys) in cases {
            let (n, fields) = event_line(&kind);
            assert_eq!(n, name);
            let mut got: Vec<&str> = fields.keys().map(String::as_str).collect();
            let mut want = keys.clone();
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(got, want, "fields of {name}");
        }
        let (_, f) = event_line(&EventKind::Fenced { error: fenced });
        assert_eq!(f["kind"], "FENCED");
        let (_, f) = event_line(&EventKind::Elected {
            token: t,
            granted_at: 1,
            deadline: 2,
        });
        assert_eq!(
            (f["producer_id"].as_i64(), f["epoch"].as_i64()),
            (Some(7), Some(2))
        );
    }

    #[test]
    fn a_line_carries_who_and_when() {
        let lines = Lines::new("billing", "host-a");
        let v = lines.line(
            "renewed",
            42,
            event_line(&EventKind::Renewed { deadline: 99 }).1,
        );
        assert_eq!(v["event"], "renewed");
        assert_eq!(v["member"], "host-a");
        assert_eq!(v["role"], "billing");
        assert_eq!(v["t_ms"], 42);
        assert_eq!(v["deadline"], 99);
    }
}
