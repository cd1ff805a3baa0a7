//! The demo's view: a table of the members redrawn in place on a terminal,
//! or a line per change when the output is not a terminal (`--plain`).

use std::io::Write;

use krabka_coordination::leadership::RoleStateReport;
use krabka_coordination::{FencingToken, NO_EPOCH};
use krabka_examples::now_ms;

use crate::args::Args;
use crate::board::Board;
use crate::MEMBERS;

/// The view and what it drew last.
pub struct View {
    /// The role.
    pub role: String,
    /// The role's partition.
    pub partition: i32,
    /// The command line.
    pub args: Args,
    /// Redraw in place (a terminal).
    pub tty: bool,
    /// Lines drawn (terminal) or log lines printed (plain).
    pub drawn_lines: usize,
    /// The last status line printed (plain).
    pub last_plain: String,
    /// What the demo is doing now.
    pub phase: String,
}

/// `s` in bold on a terminal.
pub fn bold(tty: bool, s: &str) -> String {
    if tty {
        format!("\x1b[1m{s}\x1b[0m")
    } else {
        s.to_owned()
    }
}

fn color(tty: bool, code: &str, s: &str) -> String {
    if tty {
        format!("\x1b[{code}m{s}\x1b[0m")
    } else {
        s.to_owned()
    }
}

impl View {
    /// Draws the members, the third party's view and the last log lines.
    pub fn render(
        &mut self,
        board: &Board,
        state: Option<&RoleStateReport>,
        described: Option<FencingToken>,
    ) {
        let tty = self.tty;
        let now = now_ms();
        let mut lines = Vec::new();
        lines.push(format!(
            "{}  role {}  partition {}  lease {:.1} s  renew {:.1} s  stagger {:.1} s",
            bold(tty, "krabka-coordination failover demo"),
            self.role,
            self.partition,
            self.args.lease_ms as f64 / 1000.0,
            self.args.renew_ms as f64 / 1000.0,
            self.args.stagger_ms as f64 / 1000.0
        ));
        lines.push(format!("{} {}", bold(tty, "now:"), self.phase));
        lines.push(String::new());
        lines.push(format!(
            "  {:<6} {:<8} {:<7} {:<12} {:<11} {:<12} {:>7}",
            "rank", "member", "pid", "state", "token", "lease left", "writes"
        ));
        let lease = state.and_then(|s| s.lease.clone());
        let mut order: Vec<(String, &'static str)> = Vec::new();
        if let Some(s) = state {
            let holder = lease.as_ref().map(|l| l.member.clone());
            let mut rank = 0;
            for e in &s.roster {
                let label = if Some(&e.member) == holder.as_ref() {
                    "lead".to_owned()
                } else {
                    rank += 1;
                    format!("{}", rank - 1)
                };
                if let Some(id) = MEMBERS.iter().find(|m| **m == e.member) {
                    order.push((label, id));
                }
            }
        }
        for id in MEMBERS {
            if !order.iter().any(|(_, m)| *m == id) {
                order.push(("-".into(), id));
            }
        }
        order.sort_by_key(|(label, _)| match label.as_str() {
            "lead" => -1,
            "-" => 1000,
            n => n.parse::<i32>().unwrap_or(999),
        });
        for (label, id) in order {
            let m = board.members.get(id).cloned().unwrap_or_default();
            let holds = lease.as_ref().is_some_and(|l| l.member == id);
            let token = if holds {
                lease.as_ref().map(|l| l.token.to_string())
            } else {
                None
            };
            let left = if holds {
                lease.as_ref().map(|l| {
                    let left = (l.deadline - now) as f64 / 1000.0;
                    if left >= 0.0 {
                        format!("{left:.1} s")
                    } else {
                        format!("expired {:.1} s", -left)
                    }
                })
            } else {
                None
            };
            let state_text = if holds && m.state != "LEADER" && m.state != "resigned" {
                format!("{} (lease)", m.state)
            } else {
                m.state.clone()
            };
            let state_cell = match m.state.as_str() {
                "LEADER" => color(tty, "1;32", &format!("{state_text:<12}")),
                "killed" | "fenced" => color(tty, "1;31", &format!("{state_text:<12}")),
                _ => format!("{state_text:<12}"),
            };
            lines.push(format!(
                "  {:<6} {:<8} {:<7} {} {:<11} {:<12} {:>7}",
                label,
                id,
                m.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
                state_cell,
                token.unwrap_or_default(),
                left.unwrap_or_default(),
                m.writes_ok
            ));
        }
        lines.push(String::new());
        let holder = lease.as_ref().map(|l| (l.member.clone(), l.token));
        let authority = match (described, &holder) {
            (Some(t), _) if t == NO_EPOCH => "no member has taken the role yet".to_owned(),
            (Some(t), Some((m, lt))) if *lt == t => format!("{t}: {m} is authoritative"),
            (Some(t), _) => {
                format!("{t}: no live member holds it (a resign or a challenge minted it)")
            }
            (None, _) => "(no answer yet)".to_owned(),
        };
        lines.push(format!("  describe_leadership (third party): {authority}"));
        lines.push(String::new());
        let start = board.log.len().saturating_sub(9);
        for (t, l) in &board.log[start..] {
            lines.push(format!(
                "  {:>6.1} s  {l}",
                (t - board.started) as f64 / 1000.0
            ));
        }
        if tty {
            // Redraw from the top left corner: each line cleared to its
            // end, then everything below the block cleared.
            let mut out = std::io::stdout().lock();
            let mut frame = String::from(if self.drawn_lines == 0 {
                "\x1b[2J\x1b[H"
            } else {
                "\x1b[H"
            });
            for l in &lines {
                frame.push_str(l);
                frame.push_str("\x1b[K\n");
            }
            frame.push_str("\x1b[J");
            let _ = out.write_all(frame.as_bytes());
            let _ = out.flush();
            self.drawn_lines = lines.len();
        } else {
            // No terminal: print the new event lines, and one status
            // line whenever the phase, the leader or the ranks change.
            let mut out = std::io::stdout().lock();
            for (t, l) in &board.log[self.drawn_lines.min(board.log.len())..] {
                let _ = writeln!(out, "  {:>6.1} s  {l}", (t - board.started) as f64 / 1000.0);
            }
            self.drawn_lines = board.log.len();
            let ranks: Vec<String> = state
                .map(|s| s.roster.iter().map(|e| e.member.clone()).collect())
                .unwrap_or_default();
            let status =
                format!(
                "  [{}] leader {} | roster in rank order: {} | describe_leadership: {authority}",
                self.phase,
                holder.map(|(m, t)| format!("{m} ({t})")).unwrap_or_else(|| "none".into()),
                if ranks.is_empty() { "empty".to_owned() } else { ranks.join(", ") },
            );
            if status != self.last_plain {
                let _ = writeln!(out, "{status}");
                self.last_plain = status;
            }
            let _ = out.flush();
        }
    }
}
