//! One member of a role, as a process: the building block of the failover
//! demo, the end-to-end tests and the benchmark.
//!
//! ```text
//! cargo run --example member -- --bootstrap 127.0.0.1:19092 --role billing --member host-a \
//!     [--partitions 16] [--lease-ms 3000] [--renew-ms 1000] [--stagger-ms 1000] \
//!     [--data-topic billing-out] [--write-every-ms 150] [--kafka-setting key=value]...
//! ```
//!
//! The member registers, waits for its turn, takes the role and renews its
//! lease. While it leads and `--data-topic` is given, it writes one guarded
//! record every `--write-every-ms` to partition 0 of that topic through the
//! epoch-bound producer; the record's value is a JSON object with its member
//! id, its token (`producer_id`, `epoch`) and a sequence number, so a reader
//! of the topic can check that every committed record carries the token of
//! its writer.
//!
//! # Output
//!
//! stdout carries one JSON object per line, each with `event`, `member`,
//! `role` and `t_ms` (wall clock, epoch milliseconds): `start`,
//! `registered` (`offset`), `waiting` (`rank`, `challenge_at`),
//! `challenging`, `lost_challenge`, `elected` (`producer_id`, `epoch`,
//! `token`, `granted_at`, `deadline`), `renewed` (`deadline`),
//! `renewal_failing`, `guarded_write` (`seq`, `result` = `ok`, `fenced` or
//! `error`), `fenced`, `resigning`, `resigned` (`took_ms`), `deregistered`,
//! `ended`, `exit` (`code`). Diagnostics go to stderr (`RUST_LOG`, default
//! `warn`).
//!
//! # Control
//!
//! * stdin line `resign`: resign now (and with `--rejoin`, register again at
//!   the tail and wait for another turn); `status`: print a `status` line;
//!   `quit`: like SIGTERM.
//! * SIGTERM or SIGINT: resign if leading (deregister if waiting), then exit 0.
//! * `--exit-on-stdin-eof`: treat the end of stdin (the parent died) like
//!   SIGTERM.
//!
//! # Exit codes
//!
//! 0 stopped cleanly, 1 an error, 2 bad arguments, 3 fenced (a newer epoch
//! took the role; the broker refused this member's renewal or write; the
//! member deregisters before it exits).

#[cfg(feature = "kafka")]
#[path = "support/signals.rs"]
mod signals;

#[cfg(not(feature = "kafka"))]
fn main() {
    eprintln!("the member example needs the `kafka` feature (on by default)");
    std::process::exit(2);
}

#[cfg(feature = "kafka")]
fn main() {
    std::process::exit(member::main());
}

#[cfg(feature = "kafka")]
mod member {
    use std::sync::Arc;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use krabka_coordination::leadership::{acquire_leadership, Leadership, LeadershipOptions};
    use krabka_coordination::transport::kafka::{check_state_topic, KafkaConfig, KafkaTransport};
    use krabka_coordination::transport::{OutRecord, Transport};
    use krabka_coordination::Error;
    use serde_json::{json, Map, Value};
    use tokio::sync::mpsc;
    use tokio_util::sync::CancellationToken;
    use tracing_subscriber::layer::{Context, SubscriberExt};
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer};

    use super::signals;

    /// Exit code: stopped cleanly.
    const EXIT_OK: i32 = 0;
    /// Exit code: an error.
    const EXIT_ERROR: i32 = 1;
    /// Exit code: bad arguments.
    const EXIT_USAGE: i32 = 2;
    /// Exit code: fenced by a newer epoch.
    const EXIT_FENCED: i32 = 3;

    const USAGE: &str = "\
usage: member --bootstrap HOST:PORT --role ROLE --member ID [options]

  --bootstrap HOST:PORT     Kafka bootstrap servers (or KRABKA_BOOTSTRAP)
  --role ROLE               the role (or KRABKA_ROLE)
  --member ID               this member's id (or KRABKA_MEMBER)
  --partitions N            partitions of the state topic (default 16)
  --lease-ms MS             lease duration (default 3000)
  --renew-ms MS             renew interval (default 1000)
  --stagger-ms MS           challenge stagger (default 1000)
  --poll-wait-ms MS         longest wait of one poll of the state partition (default 1000)
  --fetch-wait-ms MS        fetch.wait.max.ms of the state consumer (transport default)
  --state-topic NAME        the state topic (default __coordination_state)
  --data-topic NAME         write guarded records to partition 0 of NAME while leading
  --write-every-ms MS       pause between guarded writes (default 150)
  --kafka-setting KEY=VAL   a librdkafka setting for every client (repeatable)
  --skip-topic-check        do not check the state topic's partitions and cleanup policy
  --rejoin                  after a `resign` command, register again and wait for a turn
  --exit-on-stdin-eof       the end of stdin stops the member like SIGTERM

stdin commands: resign, status, quit. stdout: JSON lines. exit: 0 ok, 1 error, 2 usage, 3 fenced.";

    /// The parsed command line.
    #[derive(Debug, Clone)]
    struct Args {
        bootstrap: String,
        role: String,
        member: String,
        partitions: i32,
        lease: Duration,
        renew: Duration,
        stagger: Duration,
        poll_wait: Duration,
        fetch_wait: Option<Duration>,
        state_topic: Option<String>,
        data_topic: Option<String>,
        write_every: Duration,
        settings: Vec<(String, String)>,
        skip_topic_check: bool,
        rejoin: bool,
        exit_on_stdin_eof: bool,
    }

    fn parse_ms(flag: &str, value: &str) -> Result<Duration, String> {
        value
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| format!("{flag} takes whole milliseconds, got {value:?}"))
    }

    fn parse_args(argv: Vec<String>) -> Result<Args, String> {
        let mut a = Args {
            bootstrap: std::env::var("KRABKA_BOOTSTRAP").unwrap_or_default(),
            role: std::env::var("KRABKA_ROLE").unwrap_or_default(),
            member: std::env::var("KRABKA_MEMBER").unwrap_or_default(),
            partitions: 16,
            lease: Duration::from_secs(3),
            renew: Duration::from_secs(1),
            stagger: Duration::from_secs(1),
            poll_wait: Duration::from_secs(1),
            fetch_wait: None,
            state_topic: None,
            data_topic: None,
            write_every: Duration::from_millis(150),
            settings: Vec::new(),
            skip_topic_check: false,
            rejoin: false,
            exit_on_stdin_eof: false,
        };
        let mut it = argv.into_iter();
        while let Some(flag) = it.next() {
            let mut value = |flag: &str| it.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--bootstrap" => a.bootstrap = value(&flag)?,
                "--role" => a.role = value(&flag)?,
                "--member" => a.member = value(&flag)?,
                "--partitions" => {
                    let v = value(&flag)?;
                    a.partitions = v
                        .parse()
                        .map_err(|_| format!("--partitions takes a whole number, got {v:?}"))?;
                }
                "--lease-ms" => a.lease = parse_ms(&flag, &value(&flag)?)?,
                "--renew-ms" => a.renew = parse_ms(&flag, &value(&flag)?)?,
                "--stagger-ms" => a.stagger = parse_ms(&flag, &value(&flag)?)?,
                "--poll-wait-ms" => a.poll_wait = parse_ms(&flag, &value(&flag)?)?,
                "--fetch-wait-ms" => a.fetch_wait = Some(parse_ms(&flag, &value(&flag)?)?),
                "--write-every-ms" => a.write_every = parse_ms(&flag, &value(&flag)?)?,
                "--state-topic" => a.state_topic = Some(value(&flag)?),
                "--data-topic" => a.data_topic = Some(value(&flag)?),
                "--kafka-setting" => {
                    let v = value(&flag)?;
                    match v.split_once('=') {
                        Some((k, val)) if !k.is_empty() => {
                            a.settings.push((k.to_owned(), val.to_owned()))
                        }
                        _ => return Err(format!("--kafka-setting takes KEY=VALUE, got {v:?}")),
                    }
                }
                "--skip-topic-check" => a.skip_topic_check = true,
                "--rejoin" => a.rejoin = true,
                "--exit-on-stdin-eof" => a.exit_on_stdin_eof = true,
                "-h" | "--help" => return Err(String::new()),
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        for (name, v) in [
            ("--bootstrap", &a.bootstrap),
            ("--role", &a.role),
            ("--member", &a.member),
        ] {
            if v.is_empty() {
                return Err(format!("{name} is required"));
            }
        }
        if a.write_every.is_zero() {
            return Err("--write-every-ms must be above zero".into());
        }
        Ok(a)
    }

    fn now_ms() -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }

    /// Writes the JSON event lines.
    struct Out {
        member: String,
        role: String,
    }

    impl Out {
        fn emit(&self, event: &str, fields: Value) {
            let mut m = Map::new();
            m.insert("event".into(), json!(event));
            m.insert("member".into(), json!(self.member));
            m.insert("role".into(), json!(self.role));
            m.insert("t_ms".into(), json!(now_ms()));
            if let Value::Object(f) = fields {
                m.extend(f);
            }
            // stdout is line buffered: one write per event line.
            println!("{}", Value::Object(m));
        }
    }

    /// The fields of one tracing event, as text or numbers.
    #[derive(Default)]
    struct Fields(Map<String, Value>);

    impl tracing::field::Visit for Fields {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            self.0
                .insert(field.name().to_owned(), json!(format!("{value:?}")));
        }
        fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
            self.0.insert(field.name().to_owned(), json!(value));
        }
        fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
            self.0.insert(field.name().to_owned(), json!(value));
        }
        fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
            self.0.insert(field.name().to_owned(), json!(value));
        }
    }

    /// Turns the leadership loop's own log events about this member into
    /// event lines: registration, waiting, challenging, renewals.
    struct EventLayer {
        out: Arc<Out>,
    }

    impl<S: tracing::Subscriber> Layer<S> for EventLayer {
        fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
            if event.metadata().target() != "krabka_coordination::leadership" {
                return;
            }
            let mut f = Fields::default();
            event.record(&mut f);
            let mut m = f.0;
            if m.get("member").and_then(Value::as_str) != Some(self.out.member.as_str()) {
                return;
            }
            let message = m
                .remove("message")
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let pick = |m: &Map<String, Value>, keys: &[&str]| {
                let mut o = Map::new();
                for k in keys {
                    if let Some(v) = m.get(*k) {
                        o.insert((*k).to_owned(), v.clone());
                    }
                }
                Value::Object(o)
            };
            match message.as_str() {
                "registered" => self
                    .out
                    .emit("registered", pick(&m, &["offset", "partition"])),
                "waiting" => self
                    .out
                    .emit("waiting", pick(&m, &["rank", "challenge_at"])),
                "challenging" => self.out.emit("challenging", json!({})),
                "lost the challenge to a newer epoch" => {
                    self.out.emit("lost_challenge", pick(&m, &["token", "why"]))
                }
                "renewed" => self.out.emit("renewed", pick(&m, &["token", "deadline"])),
                "renewal failing" => self
                    .out
                    .emit("renewal_failing", pick(&m, &["failures", "error"])),
                "deregistered" => self.out.emit("deregistered", json!({})),
                _ => {}
            }
        }
    }

    /// A line of stdin, or its end.
    enum Command {
        Resign,
        Status,
        Quit,
    }

    fn spawn_stdin_reader(exit_on_eof: bool) -> mpsc::UnboundedReceiver<Command> {
        let (tx, rx) = mpsc::unbounded_channel();
        // tokio's stdin needs a feature the crate does not enable; a plain
        // thread reads lines instead.
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
                                eprintln!(
                                    "member: unknown command {other:?} (resign, status, quit)"
                                );
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

    fn token_fields(l: &Leadership) -> Value {
        let t = l.token();
        let lease = l.lease();
        json!({
            "producer_id": t.producer_id,
            "epoch": t.producer_epoch,
            "token": t.to_string(),
            "partition": l.partition(),
            "granted_at": lease.granted_at,
            "deadline": lease.deadline,
        })
    }

    /// Writes one guarded record every `every` while the role is held.
    async fn write_loop(
        out: Arc<Out>,
        leadership: Arc<Leadership>,
        topic: String,
        every: Duration,
    ) {
        let token = leadership.token();
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
                "member": out.member,
                "producer_id": token.producer_id,
                "epoch": token.producer_epoch,
                "seq": seq,
                "t_ms": now_ms(),
            });
            let record = OutRecord {
                topic: topic.clone(),
                partition: Some(0),
                key: Some(out.member.as_bytes().to_vec()),
                value: Some(value.to_string().into_bytes()),
                headers: Vec::new(),
            };
            match leadership.write(vec![record]).await {
                Ok(()) => out.emit(
                    "guarded_write",
                    json!({"seq": seq, "result": "ok", "token": token.to_string()}),
                ),
                Err(Error::Fenced(why)) => {
                    out.emit(
                        "guarded_write",
                        json!({"seq": seq, "result": "fenced", "error": why}),
                    );
                    return;
                }
                Err(Error::Resigned) => return,
                Err(e) => {
                    out.emit(
                        "guarded_write",
                        json!({"seq": seq, "result": "error", "error": e.to_string()}),
                    );
                    if !leadership.is_held() {
                        return;
                    }
                }
            }
        }
    }

    /// How a term ended.
    enum TermEnd {
        /// Resigned on the `resign` command; rejoin if asked to.
        ResignedOnCommand,
        /// Stopped (signal, quit, stdin closed): exit with this code.
        Exit(i32),
    }

    async fn resign(out: &Out, l: &Leadership, why: &str) -> Result<(), Error> {
        let t0 = std::time::Instant::now();
        out.emit(
            "resigning",
            json!({"why": why, "token": l.token().to_string()}),
        );
        let r = l.resign().await;
        let took_ms = t0.elapsed().as_secs_f64() * 1000.0;
        match &r {
            Ok(()) => out.emit(
                "resigned",
                json!({"took_ms": took_ms, "token": l.token().to_string()}),
            ),
            Err(e) => out.emit(
                "resign_failed",
                json!({"took_ms": took_ms, "error": e.to_string()}),
            ),
        }
        r
    }

    /// Holds the role until it ends, a command or a signal.
    async fn hold(
        out: &Arc<Out>,
        args: &Args,
        leadership: Leadership,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> TermEnd {
        let leadership = Arc::new(leadership);
        out.emit("elected", token_fields(&leadership));
        let writer = args.data_topic.clone().map(|topic| {
            tokio::spawn(write_loop(
                out.clone(),
                leadership.clone(),
                topic,
                args.write_every,
            ))
        });
        let end = loop {
            tokio::select! {
                _ = leadership.done() => {
                    let err = leadership.err();
                    match err.as_deref() {
                        Some(Error::Fenced(why)) => {
                            out.emit("fenced", json!({"token": leadership.token().to_string(), "error": why}));
                            // After a fence, resign only deregisters: a deposed
                            // member must not stay in the roster ahead of live
                            // standbys.
                            if let Err(e) = leadership.resign().await {
                                out.emit("deregister_failed", json!({"error": e.to_string()}));
                            }
                            break TermEnd::Exit(EXIT_FENCED);
                        }
                        Some(Error::Resigned) => break TermEnd::Exit(EXIT_OK),
                        other => {
                            let e = other.map(ToString::to_string).unwrap_or_default();
                            out.emit("ended", json!({"error": e}));
                            break TermEnd::Exit(EXIT_ERROR);
                        }
                    }
                }
                cmd = commands.recv() => match cmd {
                    Some(Command::Resign) => {
                        let ok = resign(out, &leadership, "command").await.is_ok();
                        break if ok { TermEnd::ResignedOnCommand } else { TermEnd::Exit(EXIT_ERROR) };
                    }
                    Some(Command::Status) => {
                        let mut f = token_fields(&leadership);
                        f["state"] = json!("leader");
                        f["renewal_failures"] = json!(leadership.renewal_failures());
                        out.emit("status", f);
                    }
                    Some(Command::Quit) | None => {
                        let ok = resign(out, &leadership, "quit").await.is_ok();
                        break TermEnd::Exit(if ok { EXIT_OK } else { EXIT_ERROR });
                    }
                },
                s = signals::received() => {
                    let ok = resign(out, &leadership, signals::name(s)).await.is_ok();
                    break TermEnd::Exit(if ok { EXIT_OK } else { EXIT_ERROR });
                }
            }
        };
        if let Some(w) = writer {
            w.abort();
            let _ = w.await;
        }
        end
    }

    async fn run(args: Args, out: Arc<Out>) -> i32 {
        let mut config = KafkaConfig::new(args.bootstrap.clone());
        for (k, v) in &args.settings {
            config = config.set(k.clone(), v.clone());
        }
        if let Some(t) = &args.state_topic {
            config = config.with_state_topic(t.clone());
        }
        if let Some(w) = args.fetch_wait {
            config = config.with_fetch_wait(w);
        }
        let options = LeadershipOptions::default()
            .with_partitions(args.partitions)
            .with_lease_duration(args.lease)
            .with_renew_interval(args.renew)
            .with_challenge_stagger(args.stagger)
            .with_poll_wait(args.poll_wait);
        if let Err(e) = options.validate() {
            eprintln!("member: {e}");
            return EXIT_USAGE;
        }
        let transport: Arc<dyn Transport> =
            match KafkaTransport::new(config.clone(), Some(&args.member)) {
                Ok(t) => Arc::new(t),
                Err(e) => {
                    eprintln!("member: {e}");
                    out.emit("ended", json!({"error": e.to_string()}));
                    return if matches!(e, Error::InvalidArgument(_)) {
                        EXIT_USAGE
                    } else {
                        EXIT_ERROR
                    };
                }
            };
        if !args.skip_topic_check {
            if let Err(e) = check_state_topic(&config, args.partitions).await {
                eprintln!("member: the state topic is not usable: {e}");
                out.emit("ended", json!({"error": e.to_string()}));
                return EXIT_ERROR;
            }
        }
        let mut commands = spawn_stdin_reader(args.exit_on_stdin_eof);
        loop {
            let cancel = CancellationToken::new();
            let acquire = acquire_leadership(
                transport.clone(),
                &args.role,
                &args.member,
                options.clone().with_cancel(cancel.clone()),
            );
            tokio::pin!(acquire);
            let stop = loop {
                tokio::select! {
                    r = &mut acquire => match r {
                        Ok(l) => break Ok(l),
                        Err(e) => {
                            eprintln!("member: acquiring the role failed: {e}");
                            out.emit("ended", json!({"error": e.to_string()}));
                            return EXIT_ERROR;
                        }
                    },
                    cmd = commands.recv() => match cmd {
                        Some(Command::Resign) => out.emit("not_leader", json!({"command": "resign"})),
                        Some(Command::Status) => out.emit("status", json!({"state": "standby"})),
                        Some(Command::Quit) | None => break Err("quit"),
                    },
                    s = signals::received() => break Err(signals::name(s)),
                }
            };
            match stop {
                Ok(leadership) => match hold(&out, &args, leadership, &mut commands).await {
                    TermEnd::ResignedOnCommand if args.rejoin => continue,
                    TermEnd::ResignedOnCommand => return EXIT_OK,
                    TermEnd::Exit(code) => return code,
                },
                Err(why) => {
                    // Cancelling deregisters the candidate before the future ends.
                    out.emit("stopping", json!({"why": why}));
                    cancel.cancel();
                    return match acquire.await {
                        Ok(l) => {
                            // Elected in the same instant: hand the role back.
                            let out2 = out.clone();
                            match resign(&out2, &l, why).await {
                                Ok(()) => EXIT_OK,
                                Err(_) => EXIT_ERROR,
                            }
                        }
                        Err(_) => EXIT_OK,
                    };
                }
            }
        }
    }

    pub fn main() -> i32 {
        let args = match parse_args(std::env::args().skip(1).collect()) {
            Ok(a) => a,
            Err(e) => {
                if !e.is_empty() {
                    eprintln!("member: {e}");
                }
                eprintln!("{USAGE}");
                return if e.is_empty() { EXIT_OK } else { EXIT_USAGE };
            }
        };
        signals::install();
        let out = Arc::new(Out {
            member: args.member.clone(),
            role: args.role.clone(),
        });
        let stderr_filter =
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
        // The event layer takes no per-layer filter (it picks its events by
        // target itself): combined with the stderr layer's EnvFilter, a
        // per-layer filter made it miss the first event of a callsite.
        tracing_subscriber::registry()
            .with(EventLayer { out: out.clone() })
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_filter(stderr_filter),
            )
            .init();
        out.emit(
            "start",
            json!({"pid": std::process::id(), "lease_ms": args.lease.as_millis() as u64}),
        );
        let rt = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("member: cannot start the runtime: {e}");
                return EXIT_ERROR;
            }
        };
        let code = rt.block_on(run(args, out.clone()));
        // Producers and consumers close on the blocking pool; give them a moment.
        rt.shutdown_timeout(Duration::from_secs(2));
        out.emit("exit", json!({"code": code}));
        code
    }
}
