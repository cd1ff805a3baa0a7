//! What every member printed, as the demo shows it, and the demo's own log.

use std::collections::BTreeMap;

use krabka_coordination::FencingToken;
use krabka_examples::now_ms;
use serde_json::Value;

/// One member as the view shows it.
#[derive(Debug, Clone, Default)]
pub struct MemberView {
    /// The process id while it runs.
    pub pid: Option<u32>,
    /// starting, registered, standby, challenging, LEADER, resigned, killed,
    /// fenced, exited (code)
    pub state: String,
    /// The token of its term while it leads.
    pub token: Option<FencingToken>,
    /// Guarded writes that committed.
    pub writes_ok: u64,
    /// When it was last elected (epoch ms).
    pub elected_at: Option<i64>,
    /// How many terms it led.
    pub terms: u32,
}

/// Every member's view and the log of what happened.
#[derive(Default)]
pub struct Board {
    /// Each member by id.
    pub members: BTreeMap<&'static str, MemberView>,
    /// What happened, stamped (epoch ms).
    pub log: Vec<(i64, String)>,
    /// When the demo started (epoch ms).
    pub started: i64,
}

impl Board {
    /// Adds a line to the log, stamped now.
    pub fn note(&mut self, line: String) {
        self.log.push((now_ms(), line));
    }

    /// Takes in one event line of member `id`.
    pub fn on_event(&mut self, id: &'static str, e: &Value) {
        let event = e["event"].as_str().unwrap_or_default().to_owned();
        let t = e["t_ms"].as_i64().unwrap_or_else(now_ms);
        let m = self.members.entry(id).or_default();
        let line = match event.as_str() {
            "registered" => {
                m.state = "registered".into();
                Some(format!("{id} registered at offset {}", e["offset"]))
            }
            "waiting" => {
                m.state = "standby".into();
                None
            }
            "challenging" => {
                m.state = "challenging".into();
                Some(format!("{id} challenges (mints an epoch)"))
            }
            "lost_challenge" => Some(format!("{id} lost the challenge to a newer epoch")),
            "elected" => {
                let token = FencingToken::new(
                    e["producer_id"].as_i64().unwrap_or(-1),
                    i16::try_from(e["epoch"].as_i64().unwrap_or(-1)).unwrap_or(-1),
                );
                m.state = "LEADER".into();
                m.token = Some(token);
                m.elected_at = Some(t);
                m.terms += 1;
                Some(format!(
                    "{id} elected with token {token}; its first lease is committed"
                ))
            }
            "guarded_write" if e["result"] == "ok" => {
                m.writes_ok += 1;
                None
            }
            "guarded_write" if e["result"] == "fenced" => {
                Some(format!("{id}: guarded write FENCED by the broker"))
            }
            "fenced" => {
                m.state = "fenced".into();
                Some(format!(
                    "{id} FENCED: {}",
                    e["error"].as_str().unwrap_or_default()
                ))
            }
            "resigning" => Some(format!("{id} resigns")),
            "resigned" => {
                m.state = "resigned".into();
                m.token = None;
                Some(format!(
                    "{id} resigned in {} ms (new epoch minted, lease {})",
                    e["took_ms"].as_i64().unwrap_or(0),
                    if e["cleared"] == true {
                        "cleared"
                    } else {
                        "NOT cleared"
                    }
                ))
            }
            "exit" if m.state != "killed" => {
                m.state = format!("exited ({})", e["code"]);
                None
            }
            _ => None,
        };
        if let Some(l) = line {
            self.log.push((t, l));
        }
    }
}
