//! The demo's script: three members, a SIGKILL of the leader, a restart, a
//! resign, each step observed like a third party would (the role's
//! partition and the transaction coordinator, through a `Client`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use krabka_coordination::client::Client;
use krabka_coordination::leadership::RoleStateReport;
use krabka_coordination::FencingToken;
use krabka_examples::{now_ms, MemberProcess, MemberSpec, Signal};

use crate::args::Args;
use crate::board::Board;
use crate::view::View;
use crate::{DATA_TOPIC, MEMBERS};

/// A member process of the demo and how many of its lines the board has.
pub struct Proc {
    /// The member id.
    pub id: &'static str,
    /// The process.
    pub process: MemberProcess,
    seen: usize,
}

/// The demo's state.
pub struct Demo {
    /// The command line.
    pub args: Args,
    /// The cluster.
    pub bootstrap: String,
    /// The demo's role.
    pub role: String,
    /// The member binary.
    pub bin: PathBuf,
    /// What the members printed.
    pub board: Board,
    /// The member processes.
    pub procs: Vec<Proc>,
    /// The third party's client.
    pub observer: Client,
    /// The view.
    pub view: View,
    /// The runtime of the observer.
    pub rt: tokio::runtime::Runtime,
    /// Where the members' stderr goes.
    pub logs: PathBuf,
    /// Set on ctrl-c or SIGTERM.
    pub interrupted: Arc<AtomicBool>,
}

/// Why the demo stopped early.
pub struct Interrupted;

/// The measured failover.
pub struct Failover {
    /// From the kill to the next lease read back.
    pub total_ms: i64,
    /// Of that, the dead leader's lease still running.
    pub lease_left_ms: i64,
    /// The new lease granted after deadline + rank x stagger.
    pub beyond_ms: i64,
    /// Who took over.
    pub new_leader: String,
    /// The new token.
    pub token: FencingToken,
}

/// The measured hand-over.
pub struct Handover {
    /// From the resign command to the next lease read back.
    pub seen_ms: i64,
    /// From the resign command to the next member's `elected`.
    pub elected_ms: Option<i64>,
    /// Who resigned.
    pub from: String,
    /// Who took over.
    pub to: String,
    /// The new token.
    pub token: FencingToken,
}

/// What the demo measured.
#[derive(Default)]
pub struct Summary {
    /// The failover, if observed.
    pub failover: Option<Failover>,
    /// The hand-over, if observed.
    pub handover: Option<Handover>,
}

impl Demo {
    /// The role's state and its token at the coordinator, as a third party
    /// reads them.
    pub fn observe(&self) -> (Option<RoleStateReport>, Option<FencingToken>) {
        self.rt.block_on(async {
            let s = self.observer.describe_role_state(&self.role).await.ok();
            let d = self
                .observer
                .describe_leadership(&self.role)
                .await
                .ok()
                .map(|s| s.token);
            (s, d)
        })
    }

    /// Takes in the lines the members printed since the last look.
    fn collect(&mut self) {
        for p in &mut self.procs {
            let new = p.process.events_from(p.seen);
            p.seen += new.len();
            for e in &new {
                self.board.on_event(p.id, e);
            }
        }
    }

    fn check_interrupt(&self) -> Result<(), Interrupted> {
        if self.interrupted.load(Ordering::SeqCst) {
            Err(Interrupted)
        } else {
            Ok(())
        }
    }

    /// Refreshes the view until `until` holds for the role state (or `max`
    /// passes); returns the state and when it was read.
    fn show_until(
        &mut self,
        max: Duration,
        until: impl Fn(&RoleStateReport) -> bool,
    ) -> Result<Option<(RoleStateReport, i64)>, Interrupted> {
        let deadline = Instant::now() + max;
        loop {
            self.check_interrupt()?;
            let (state, described) = self.observe();
            let seen = now_ms();
            self.collect();
            self.view.render(&self.board, state.as_ref(), described);
            if let Some(s) = state.filter(|s| until(s)) {
                return Ok(Some((s, seen)));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(
                self.args
                    .refresh
                    .clamp(Duration::from_millis(20), Duration::from_millis(100)),
            );
        }
    }

    /// Refreshes the view for `d`.
    fn show_for(&mut self, d: Duration) -> Result<(), Interrupted> {
        let deadline = Instant::now() + d;
        while Instant::now() < deadline {
            self.check_interrupt()?;
            let (state, described) = self.observe();
            self.collect();
            self.view.render(&self.board, state.as_ref(), described);
            std::thread::sleep(self.args.refresh);
        }
        Ok(())
    }

    /// Starts member `id`.
    fn spawn(&mut self, id: &'static str) -> Result<(), String> {
        let a = &self.args;
        let process = MemberSpec::new(&self.bin, &self.bootstrap, &self.role, id)
            .arg("--partitions", a.partitions)
            .arg("--lease-ms", a.lease_ms)
            .arg("--renew-ms", a.renew_ms)
            .arg("--stagger-ms", a.stagger_ms)
            .arg("--data-topic", DATA_TOPIC)
            .arg("--write-every-ms", 150)
            .flag("--rejoin")
            .flag("--exit-on-stdin-eof")
            .kafka_settings(&a.settings)
            .env(
                "RUST_LOG",
                &std::env::var("RUST_LOG")
                    .unwrap_or_else(|_| "warn,krabka_coordination=info".into()),
            )
            .stderr_to(self.logs.join(format!("{id}.log")))
            // A ctrl-c in the terminal reaches the demo only, and the demo
            // stops the members in order.
            .own_process_group()
            .spawn()
            .map_err(|e| e.to_string())?;
        let m = self.board.members.entry(id).or_default();
        m.pid = Some(process.pid());
        m.state = "starting".into();
        m.token = None;
        self.procs.push(Proc {
            id,
            process,
            seen: 0,
        });
        Ok(())
    }

    fn proc_of(&mut self, id: &str) -> Option<&mut Proc> {
        self.procs.iter_mut().find(|p| p.id == id)
    }

    /// Stops every member (SIGTERM: each resigns or deregisters), killing
    /// those still running after 10 s.
    pub fn stop_all(&mut self) {
        for p in &mut self.procs {
            if p.process.try_status().is_none() {
                let _ = p.process.signal(Signal::Terminate);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for p in &mut self.procs {
            let left = deadline.saturating_duration_since(Instant::now());
            if p.process.wait_exit(left).is_none() {
                let _ = p.process.kill();
            }
        }
        self.collect();
        self.procs.clear();
    }

    /// Runs the script.
    pub fn run(&mut self) -> Result<Summary, Interrupted> {
        let lease_ms = self.args.lease_ms as i64;
        let stagger_ms = self.args.stagger_ms as i64;
        let renew = Duration::from_millis(self.args.renew_ms);
        let long = Duration::from_millis((lease_ms + 3 * stagger_ms) as u64 + 15_000);

        // 1. three members; the first one takes the role.
        self.view.phase = "starting three members of one role".into();
        for id in MEMBERS {
            if let Err(e) = self.spawn(id) {
                self.board.note(format!("could not start {id}: {e}"));
            }
            // Registration order is rank order: give each a head start.
            self.show_until(Duration::from_secs(20), |s| {
                s.roster.iter().any(|e| e.member == id)
            })?;
        }
        let Some((s, _)) = self.show_until(long, |s| {
            s.lease.is_some() && s.roster.len() == MEMBERS.len()
        })?
        else {
            self.board.note("no member took the role in time".into());
            return Ok(Summary::default());
        };
        let first = s.lease.map(|l| l.member).unwrap_or_default();
        self.view.phase = format!(
            "{first} leads and renews its lease every {:.1} s",
            renew.as_secs_f64()
        );
        self.show_for(renew * 3)?;

        // 2. SIGKILL the leader.
        let Some(failover) = self.kill_leader(long)? else {
            return Ok(Summary::default());
        };
        self.show_for(renew * 2)?;

        // 3. restart the killed member: it lands at the tail.
        self.restart(&failover.killed)?;
        self.show_for(renew * 2)?;

        // 4. the leader resigns.
        let handover = self.resign_leader()?;
        if handover.is_some() {
            self.show_for(renew * 3)?;
        }
        Ok(Summary {
            failover: Some(failover.measured),
            handover,
        })
    }
}

/// A failover and the member that was killed.
struct Killed {
    killed: String,
    measured: Failover,
}

impl Demo {
    fn kill_leader(&mut self, long: Duration) -> Result<Option<Killed>, Interrupted> {
        let stagger_ms = self.args.stagger_ms as i64;
        let (s, _) = self.observe();
        let Some(s) = s else {
            self.board.note("the role's state could not be read".into());
            return Ok(None);
        };
        let Some(old) = s.lease.clone() else {
            self.board.note("no lease to kill".into());
            return Ok(None);
        };
        let killed = old.member.clone();
        let ranks: Vec<String> = s
            .roster
            .iter()
            .filter(|e| e.member != killed)
            .map(|e| e.member.clone())
            .collect();
        let kill_at = now_ms();
        if let Some(p) = self.proc_of(&killed) {
            let _ = p.process.kill();
        }
        if let Some(m) = self.board.members.get_mut(killed.as_str()) {
            m.state = "killed".into();
            m.pid = None;
        }
        self.board.log.push((
            kill_at,
            format!(
                "demo: SIGKILL {killed} (lease deadline in {} ms)",
                old.deadline - kill_at
            ),
        ));
        self.view.phase = format!(
            "{killed} was killed: {} waits for its lease to run out, then challenges",
            ranks.first().cloned().unwrap_or_default()
        );
        let (old_token, dead) = (old.token, killed.clone());
        let Some((s, seen)) = self.show_until(long, move |s| {
            s.lease
                .as_ref()
                .is_some_and(|l| l.member != dead && l.token > old_token)
        })?
        else {
            self.board.note("no failover in time".into());
            return Ok(None);
        };
        let new = s.lease.expect("the predicate saw a lease");
        let rank = ranks.iter().position(|m| *m == new.member).unwrap_or(0) as i64;
        let measured = Failover {
            total_ms: seen - kill_at,
            lease_left_ms: old.deadline - kill_at,
            beyond_ms: new.granted_at - (old.deadline + rank * stagger_ms),
            new_leader: new.member.clone(),
            token: new.token,
        };
        self.board.note(format!(
            "demo: failover {killed} -> {} in {} ms ({} ms were lease left; {} ms beyond deadline + rank x stagger)",
            new.member, measured.total_ms, measured.lease_left_ms, measured.beyond_ms
        ));
        self.view.phase = format!(
            "{} took over with token {}; {killed} restarts",
            new.member, new.token
        );
        Ok(Some(Killed { killed, measured }))
    }

    fn restart(&mut self, killed: &str) -> Result<(), Interrupted> {
        let id = MEMBERS
            .iter()
            .copied()
            .find(|m| *m == killed)
            .unwrap_or(MEMBERS[0]);
        self.procs.retain(|p| p.id != id);
        if let Err(e) = self.spawn(id) {
            self.board.note(format!("could not restart {id}: {e}"));
        }
        self.board.note(format!(
            "demo: restarted {id}; it registers again and goes to the tail"
        ));
        self.show_until(Duration::from_secs(20), move |s| {
            s.roster.last().is_some_and(|e| e.member == id) && s.roster.len() == MEMBERS.len()
        })?;
        self.view.phase = format!("{id} is back at the tail of the roster: no failback");
        Ok(())
    }

    fn resign_leader(&mut self) -> Result<Option<Handover>, Interrupted> {
        let Some(held) = self.observe().0.and_then(|s| s.lease) else {
            self.board.note("no lease to resign".into());
            return Ok(None);
        };
        let resigner = held.member.clone();
        let resign_at = now_ms();
        if let Some(p) = self.proc_of(&resigner) {
            let _ = p.process.send("resign");
        }
        self.board.note(format!("demo: asked {resigner} to resign"));
        self.view.phase = format!(
            "{resigner} resigns: the next in rank takes over without waiting for the lease"
        );
        let (from, held_token) = (resigner.clone(), held.token);
        let Some((s, seen)) = self.show_until(Duration::from_secs(15), move |s| {
            s.lease
                .as_ref()
                .is_some_and(|l| l.member != from && l.token > held_token)
        })?
        else {
            self.board.note("no hand-over in time".into());
            return Ok(None);
        };
        let next = s.lease.expect("the predicate saw a lease");
        // The lease can be read back a moment before its member's `elected`
        // line arrives.
        let elected_at = self.proc_of(&next.member).and_then(|p| {
            p.process
                .wait_event(0, Duration::from_secs(2), "elected", |e| {
                    e["event"] == "elected" && e["t_ms"].as_i64().is_some_and(|t| t >= resign_at)
                })
                .ok()
                .and_then(|(_, e)| e["t_ms"].as_i64())
        });
        self.collect();
        let handover = Handover {
            seen_ms: seen - resign_at,
            elected_ms: elected_at.map(|t| t - resign_at),
            from: resigner.clone(),
            to: next.member.clone(),
            token: next.token,
        };
        self.board.note(format!(
            "demo: hand-over {} -> {}: elected {} ms after the resign command, read back at {} ms",
            handover.from,
            handover.to,
            handover
                .elected_ms
                .map(|v| v.to_string())
                .unwrap_or_else(|| "?".into()),
            handover.seen_ms
        ));
        self.view.phase = format!(
            "{} leads with token {}; {resigner} rejoined at the tail",
            next.member, next.token
        );
        Ok(Some(handover))
    }
}
