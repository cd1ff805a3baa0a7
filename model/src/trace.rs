//! Readable traces: each action named with its member, each state in one
//! line, and the records each step appended decoded with the core's codec.

use std::fmt::Write;

use krabka_coordination::{decode_key, decode_lease, decode_registration, KeyKind};

use crate::model::{Action, LeaseModel};
use crate::state::{Entry, Phase, Resign, State, Status};

/// `action` with the member's id (and role for a coordinator timeout).
pub fn action(model: &LeaseModel, action: &Action) -> String {
    let c = &model.config;
    let who = |m: &u8| {
        let spec = &c.members[*m as usize];
        if c.roles.len() > 1 {
            format!("{}@{}", spec.id, c.roles[spec.role])
        } else {
            spec.id.clone()
        }
    };
    match action {
        Action::Tick => "tick".into(),
        Action::TxnTimeout(r) => format!(
            "coordinator: {}'s transaction times out",
            c.roles[*r as usize]
        ),
        Action::ClockStep(m, d) => format!("{}: wall clock steps {d:+} tick(s)", who(m)),
        Action::Register(m) => format!("{}: register", who(m)),
        Action::Poll(m) => format!("{}: poll", who(m)),
        Action::Timer(m) => format!("{}: wait over, evaluate", who(m)),
        Action::ChallengePoll(m) => format!("{}: challenge: read what is new", who(m)),
        Action::HeldBack(m) => format!("{}: challenge: held back?", who(m)),
        Action::HeldBackRead(m) => format!("{}: challenge: read again", who(m)),
        Action::Mint(m) => format!("{}: InitProducerId", who(m)),
        Action::FirstLease(m) => format!("{}: write the first lease", who(m)),
        Action::Heal(m) => format!("{}: remove passed-over registrations", who(m)),
        Action::Renew(m) => format!("{}: renew", who(m)),
        Action::ResignStep(m) => format!("{}: resign step", who(m)),
        Action::ResignTimeout(m) => format!("{}: resign step times out", who(m)),
        Action::Leave(m) => format!("{}: deregister and exit", who(m)),
        Action::Write(m) => format!("{}: guarded write", who(m)),
        Action::Resign(m) => format!("{}: resign", who(m)),
        Action::Crash(m) => format!("{}: CRASH", who(m)),
        Action::Pause(m) => format!("{}: PAUSE", who(m)),
        Action::Resume(m) => format!("{}: resume", who(m)),
        Action::Disconnect(m) => format!("{}: CUT OFF", who(m)),
        Action::Reconnect(m) => format!("{}: reconnect", who(m)),
        Action::Stall(m) => format!("{}: STALL mid-renewal (transaction left open)", who(m)),
        Action::Restart(m) => format!("{}: restart", who(m)),
        Action::NeighbourStall(r) => format!(
            "{}'s leader: STALL with a transaction open",
            c.roles[*r as usize]
        ),
        Action::NeighbourCommit(r) => format!("{}'s leader: commit", c.roles[*r as usize]),
    }
}

fn phase(model: &LeaseModel, s: &State, m: usize) -> String {
    let me = &s.members[m];
    let ids = |stale: &[u8]| -> String {
        stale
            .iter()
            .map(|x| model.config.members[*x as usize].id.as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut p = match &me.phase {
        Phase::Down => "down".to_string(),
        Phase::Start => "starting".into(),
        Phase::Register => "register again".into(),
        Phase::CatchUp { offset } => format!("catching up to @{offset}"),
        Phase::Wait { at } if *at == i64::MAX => "following".into(),
        Phase::Wait { at } => format!("waiting until {}", at / crate::TICK_MS),
        Phase::ChallengePoll => "challenging (read)".into(),
        Phase::HeldBack { .. } => "challenging (held back?)".into(),
        Phase::HeldBackRead => "challenging (read again)".into(),
        Phase::PollWait { until } => format!("polling until {until}"),
        Phase::Mint(c) => format!("minting (stale [{}])", ids(&c.stale)),
        Phase::FirstLease(token, _) => format!("writing first lease {token}"),
        Phase::Leading => "LEADING".into(),
        Phase::Resigning { stage, .. } => match stage {
            Resign::Tombstone(t) => format!("resigning (tombstone via {t})"),
            Resign::Bump => "resigning (bump)".into(),
            Resign::Deregister => "resigning (deregister)".into(),
        },
        Phase::Leaving => "leaving".into(),
    };
    if let Some(t) = me.term {
        let _ = write!(
            p,
            " {} deadline {}",
            t.token,
            t.sent.saturating_add(model.config.lease)
        );
        if t.in_flight.is_some() {
            p.push_str(" (renewal open)");
        }
        if t.expired {
            p.push_str(" (term ended)");
        }
    }
    if let Some(stale) = &me.heal {
        let _ = write!(p, " (to heal [{}])", ids(stale));
    }
    if me.paused {
        p.push_str(" [paused]");
    }
    if !me.connected {
        p.push_str(" [cut off]");
    }
    if me.skew != 0 {
        let _ = write!(p, " [clock {:+}]", me.skew);
    }
    p
}

/// One line: the time, each member, the coordinator, the log's ends.
pub fn state_line(model: &LeaseModel, s: &State) -> String {
    let c = &model.config;
    let mut line = format!("t={}", s.now);
    for m in 0..s.members.len() {
        let _ = write!(line, " | {}: {}", c.members[m].id, phase(model, s, m));
    }
    for (r, txn) in s.coordinator.iter().enumerate() {
        let epoch = txn.epoch.map_or("none".to_string(), |t| t.to_string());
        let _ = write!(line, " | {} epoch {epoch}", c.roles[r]);
        if let Some((t, since)) = txn.open {
            let _ = write!(line, " (open txn of {t} since {since})");
        }
    }
    let _ = write!(line, " | log {} LSO {}", s.log.len(), s.last_stable());
    if !s.data.is_empty() {
        let tokens: Vec<String> = s.data.iter().map(|(_, t)| t.to_string()).collect();
        let _ = write!(line, " | data [{}]", tokens.join(" "));
    }
    line
}

/// One log entry decoded: its offset, status, kind, member and lease.
pub fn entry(offset: usize, e: &Entry) -> String {
    let status = match e.status {
        Status::Committed => "",
        Status::Aborted => " (aborted)",
        Status::Open(_) => " (open)",
    };
    let Ok(key) = decode_key(&e.key) else {
        return format!("@{offset} undecodable key{status}");
    };
    let what = match (key.kind, &e.value) {
        (KeyKind::Registration, None) => format!("deregister {}", key.member),
        (KeyKind::Registration, Some(v)) => decode_registration(v)
            .map(|r| {
                format!(
                    "register {} at {}",
                    r.member,
                    r.registered_at / crate::TICK_MS
                )
            })
            .unwrap_or_else(|e| e.to_string()),
        (KeyKind::Lease, None) => "lease tombstone".into(),
        (KeyKind::Lease, Some(v)) => decode_lease(v)
            .map(|l| {
                format!(
                    "lease {} {} granted {} deadline {}",
                    l.member,
                    l.token,
                    l.granted_at / crate::TICK_MS,
                    l.deadline / crate::TICK_MS
                )
            })
            .unwrap_or_else(|e| e.to_string()),
    };
    format!("@{offset} {}: {what}{status}", key.role)
}

/// A path (each state with the action taken from it) as numbered steps,
/// each with the state after it and the records it appended.
pub fn explain(model: &LeaseModel, steps: &[(State, Option<Action>)]) -> String {
    let mut out = String::new();
    let mut previous: Option<&State> = None;
    for (i, (state, _)) in steps.iter().enumerate() {
        match i.checked_sub(1).and_then(|j| steps[j].1.as_ref()) {
            None => {
                let _ = writeln!(out, "  init: {}", state_line(model, state));
            }
            Some(a) => {
                let _ = writeln!(out, "  {i:>3}. {}", action(model, a));
                let _ = writeln!(out, "       {}", state_line(model, state));
            }
        }
        if let Some(p) = previous {
            for (offset, e) in state.log.iter().enumerate().skip(p.log.len()) {
                let _ = writeln!(out, "       + {}", entry(offset, e));
            }
        }
        previous = Some(state);
    }
    out
}
