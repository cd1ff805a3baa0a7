//! What the member process does: acquire through a [`Client`], print the
//! core's events as they come, hold the role, react to commands and
//! signals.

use std::sync::Arc;

use krabka_coordination::client::Client;
use krabka_coordination::events::{self, EventKind, EventReceiver, EventSender};
use krabka_coordination::leadership::{Leadership, LeadershipOptions};
use krabka_coordination::transport::kafka::{KafkaClient, TopicSpec};
use krabka_coordination::{Error, ErrorKind};
use krabka_examples::exit;
use krabka_examples::lines::{error_fields, token_fields, Lines};
use krabka_examples::now_ms;
use serde_json::{json, Map, Value};
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::args::Args;
use crate::pipe::pipe_loop;
use crate::writes::write_loop;

/// Prints the core's events of this member, in the order it took the steps.
struct Printer {
    lines: Arc<Lines>,
    events: EventReceiver,
    /// When the current resign began (epoch ms): a `resigned` line says how
    /// long the resign took to clear the lease.
    resigning_since: Option<i64>,
}

impl Printer {
    fn print(&mut self, event: &events::Event) {
        let mut extra = Map::new();
        if let (EventKind::Resigned { .. }, Some(since)) = (&event.kind, self.resigning_since) {
            extra.insert("took_ms".into(), json!(event.at - since));
        }
        self.lines.event(event, extra);
    }

    /// Prints every event already delivered.
    fn drain(&mut self) {
        while let Ok(e) = self.events.try_recv() {
            self.print(&e);
        }
    }
}

/// A line of stdin.
enum Command {
    Resign,
    Status,
    Quit,
}

/// Reads stdin commands on a thread (`None` once stdin ends, with
/// `--exit-on-stdin-eof`).
fn spawn_stdin_reader(exit_on_eof: bool) -> mpsc::UnboundedReceiver<Command> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        loop {
            line.clear();
            match std::io::stdin().read_line(&mut line) {
                Ok(0) | Err(_) => {
                    if exit_on_eof {
                        let _ = tx.send(Command::Quit);
                    }
                    return;
                }
                Ok(_) => {
                    let cmd = match line.trim() {
                        "resign" => Command::Resign,
                        "status" => Command::Status,
                        "quit" | "stop" => Command::Quit,
                        "" => continue,
                        other => {
                            eprintln!("member: unknown command {other:?} (resign, status, quit)");
                            continue;
                        }
                    };
                    if tx.send(cmd).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// SIGTERM and SIGINT: the member stops cleanly on either.
struct Stops {
    term: Signal,
    int: Signal,
}

impl Stops {
    fn new() -> std::io::Result<Stops> {
        Ok(Stops {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// Resolves with the signal's name when one arrives.
    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

/// How a term ended.
enum TermEnd {
    /// Resigned on the `resign` command; rejoin if asked to.
    ResignedOnCommand,
    /// Stopped (fenced, a signal, quit, stdin closed): exit with this code.
    Exit(i32),
}

/// Everything the loops share.
struct Member {
    args: Args,
    lines: Arc<Lines>,
    printer: Printer,
    commands: mpsc::UnboundedReceiver<Command>,
    stops: Stops,
    events: EventSender,
    /// The client's Kafka protocol client, for the pipeline's reader.
    kafka: KafkaClient,
}

/// Runs the member until it stops; returns the exit code.
pub async fn run(args: Args, lines: Arc<Lines>) -> i32 {
    let stops = match Stops::new() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("member: cannot watch for signals: {e}");
            return exit::ERROR;
        }
    };
    let usage_or_error = |e: &Error| {
        if e.kind() == ErrorKind::InvalidArgument {
            exit::USAGE
        } else {
            exit::ERROR
        }
    };
    let client =
        match Client::new(args.kafka_config()).and_then(|c| c.with_partitions(args.partitions)) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("member: {e}");
                lines.emit("ended", Value::Object(error_fields(&e)));
                return usage_or_error(&e);
            }
        };
    let options = client
        .leadership_options()
        .with_lease_duration(args.lease)
        .with_renew_interval(args.renew)
        .with_challenge_stagger(args.stagger)
        .with_poll_wait(args.poll_wait);
    if let Err(e) = options.validate() {
        eprintln!("member: {e}");
        return exit::USAGE;
    }
    if !args.skip_topic_check {
        let spec = TopicSpec::default().with_partitions(args.partitions);
        if let Err(e) = client.check_state_topic(spec).await {
            eprintln!("member: the state topic is not usable: {e}");
            lines.emit("ended", Value::Object(error_fields(&e)));
            return exit::ERROR;
        }
    }
    let kafka = match client.kafka_client() {
        Ok(k) => k.clone(),
        Err(e) => {
            eprintln!("member: {e}");
            return exit::ERROR;
        }
    };
    let (tx, rx) = events::channel();
    let mut m = Member {
        kafka,
        commands: spawn_stdin_reader(args.exit_on_stdin_eof),
        printer: Printer {
            lines: Arc::clone(&lines),
            events: rx,
            resigning_since: None,
        },
        args,
        lines,
        stops,
        events: tx,
    };
    let code = m.serve(&client, options).await;
    m.printer.drain();
    code
}

impl Member {
    /// Acquires, holds, and (with `--rejoin`) acquires again after a resign
    /// command.
    async fn serve(&mut self, client: &Client, options: LeadershipOptions) -> i32 {
        let (role, member) = (self.args.role.clone(), self.args.member.clone());
        loop {
            let cancel = CancellationToken::new();
            let options = options
                .clone()
                .with_cancel(cancel.clone())
                .with_events(self.events.clone());
            let acquire = client.acquire(&role, &member, options);
            tokio::pin!(acquire);
            let stop = loop {
                tokio::select! {
                    r = &mut acquire => match r {
                        Ok(l) => break Ok(l),
                        Err(e) => {
                            self.printer.drain();
                            eprintln!("member: acquiring the role failed: {e}");
                            self.lines.emit("ended", Value::Object(error_fields(&e)));
                            return exit::ERROR;
                        }
                    },
                    Some(e) = self.printer.events.recv() => self.printer.print(&e),
                    cmd = self.commands.recv() => match cmd {
                        Some(Command::Resign) => self.lines.emit("not_leader", json!({"command": "resign"})),
                        Some(Command::Status) => self.lines.emit("status", json!({"state": "standby"})),
                        Some(Command::Quit) | None => break Err("quit"),
                    },
                    why = self.stops.recv() => break Err(why),
                }
            };
            match stop {
                Ok(leadership) => match self.hold(leadership).await {
                    TermEnd::ResignedOnCommand if self.args.rejoin => continue,
                    TermEnd::ResignedOnCommand => return exit::OK,
                    TermEnd::Exit(code) => return code,
                },
                Err(why) => {
                    // Cancelling deregisters the candidate before the future
                    // ends (and resigns a role won in the same instant).
                    self.printer.drain();
                    self.lines.emit("stopping", json!({"why": why}));
                    cancel.cancel();
                    return match acquire.await {
                        Ok(l) => match self.resign(&l, why).await {
                            Ok(()) => exit::OK,
                            Err(_) => exit::ERROR,
                        },
                        Err(_) => exit::OK,
                    };
                }
            }
        }
    }

    /// Holds the role until it ends, a command or a signal.
    async fn hold(&mut self, leadership: Leadership) -> TermEnd {
        // The `elected` line comes before anything the term prints.
        self.printer.drain();
        let leadership = Arc::new(leadership);
        let lines = Arc::clone(&self.lines);
        let writer = match (&self.args.pipe, &self.args.data_topic) {
            (Some(pipe), _) => Some(tokio::spawn(pipe_loop(
                lines,
                Arc::clone(&leadership),
                self.kafka.clone(),
                pipe.clone(),
            ))),
            (None, Some(topic)) => Some(tokio::spawn(write_loop(
                lines,
                Arc::clone(&leadership),
                topic.clone(),
                self.args.write_every,
            ))),
            (None, None) => None,
        };
        let end = loop {
            tokio::select! {
                _ = leadership.done() => {
                    self.printer.drain();
                    let lost = match leadership.err() {
                        Some(e) if e.means_fenced() => Some(exit::FENCED),
                        Some(e) if e.kind() == ErrorKind::LeaseExpired => Some(exit::LEASE_EXPIRED),
                        Some(e) if e.kind() == ErrorKind::Resigned => break TermEnd::Exit(exit::OK),
                        // The `ended` line (a fatal error) came with the events.
                        _ => None,
                    };
                    match lost {
                        Some(code) => {
                            // After the term ended, resign only deregisters: a
                            // member that lost the role must not stay in the
                            // roster ahead of live standbys.
                            if let Err(e) = leadership.resign().await {
                                self.lines.emit("deregister_failed", Value::Object(error_fields(&e)));
                            }
                            break TermEnd::Exit(code);
                        }
                        None => break TermEnd::Exit(exit::ERROR),
                    }
                }
                Some(e) = self.printer.events.recv() => self.printer.print(&e),
                cmd = self.commands.recv() => match cmd {
                    Some(Command::Resign) => {
                        let ok = self.resign(&leadership, "command").await.is_ok();
                        break if ok { TermEnd::ResignedOnCommand } else { TermEnd::Exit(exit::ERROR) };
                    }
                    Some(Command::Status) => self.status(&leadership),
                    Some(Command::Quit) | None => {
                        let ok = self.resign(&leadership, "quit").await.is_ok();
                        break TermEnd::Exit(if ok { exit::OK } else { exit::ERROR });
                    }
                },
                why = self.stops.recv() => {
                    let ok = self.resign(&leadership, why).await.is_ok();
                    break TermEnd::Exit(if ok { exit::OK } else { exit::ERROR });
                }
            }
        };
        if let Some(w) = writer {
            w.abort();
            let _ = w.await;
        }
        self.printer.drain();
        end
    }

    fn status(&self, l: &Leadership) {
        let lease = l.lease();
        let mut f = token_fields(l.token());
        f.insert("state".into(), json!("leader"));
        f.insert("partition".into(), json!(l.partition()));
        f.insert("granted_at".into(), json!(lease.granted_at));
        f.insert("deadline".into(), json!(lease.deadline));
        f.insert("renewal_failures".into(), json!(l.renewal_failures()));
        self.lines.emit("status", Value::Object(f));
    }

    /// Resigns, between a `resigning` line and the core's `resigned` and
    /// `deregistered` events (or a `resign_failed` line).
    async fn resign(&mut self, l: &Leadership, why: &str) -> Result<(), Error> {
        self.printer.drain();
        let since = now_ms();
        self.printer.resigning_since = Some(since);
        self.lines.emit(
            "resigning",
            json!({"why": why, "token": l.token().to_string()}),
        );
        let r = l.resign().await;
        self.printer.drain();
        self.printer.resigning_since = None;
        if let Err(e) = &r {
            let mut f = error_fields(e);
            f.insert("took_ms".into(), json!(now_ms() - since));
            self.lines.emit("resign_failed", Value::Object(f));
        }
        r
    }
}
