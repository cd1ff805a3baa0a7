//! The core's `tracing` events, forwarded to the host's logging.
//!
//! A binding installs one [`ForwardSubscriber`] as its global `tracing`
//! subscriber ([`install`]). It turns every enabled event into a
//! [`LogRecord`] (level, target, message, the event's fields and the fields
//! of the spans it happened in, such as the member's role and id) and hands
//! it to the binding's sink, typically [`Forwarder::send`].
//!
//! Events happen on tokio workers and librdkafka threads, which must never
//! wait for a host lock (Python's GIL). The [`Forwarder`] therefore queues
//! records (bounded; what does not fit is counted and reported) and delivers
//! them in batches from a thread of its own, made per process (a forked
//! child starts its own). The [`LevelSwitch`] says which levels are
//! forwarded at all, so disabled levels cost one atomic load.

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_core::span::Current;

use crate::per_process::PerProcess;

mod spans;

/// One log event of the core, ready for the host's logging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// The level.
    pub level: Level,
    /// The module (or `librdkafka`) that logged it.
    pub target: String,
    /// The source file of the log statement, when known.
    pub file: Option<String>,
    /// Its line, when known.
    pub line: Option<u32>,
    /// The message.
    pub message: String,
    /// The event's other fields, in the order they were recorded.
    pub fields: Vec<(String, String)>,
    /// The fields of the spans the event happened in, outermost first (the
    /// member's `role`, `member` and `partition`).
    pub context: Vec<(String, String)>,
}

impl LogRecord {
    /// The record as one line: `role=r member=m: message key=value ...`.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (i, (k, v)) in self.context.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            let _ = write!(out, "{sep}{k}={v}");
        }
        if !self.context.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&self.message);
        for (k, v) in &self.fields {
            let _ = write!(out, " {k}={v}");
        }
        out
    }

    /// The record that reports `n` records dropped because the queue was
    /// full.
    pub fn dropped(n: u64) -> LogRecord {
        LogRecord {
            level: Level::WARN,
            target: module_path!().to_owned(),
            message: format!("{n} log records were dropped: the host did not take them in time"),
            file: None,
            line: None,
            fields: Vec::new(),
            context: Vec::new(),
        }
    }
}

/// The most verbose level forwarded, changeable at any time.
#[derive(Debug)]
pub struct LevelSwitch(AtomicU8);

fn rank(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 1,
        Level::WARN => 2,
        Level::INFO => 3,
        Level::DEBUG => 4,
        Level::TRACE => 5,
    }
}

impl LevelSwitch {
    /// Forwards `level` and everything more severe (`None`: nothing).
    pub const fn new(level: Option<Level>) -> Self {
        LevelSwitch(AtomicU8::new(match level {
            None => 0,
            Some(Level::ERROR) => 1,
            Some(Level::WARN) => 2,
            Some(Level::INFO) => 3,
            Some(Level::DEBUG) => 4,
            Some(Level::TRACE) => 5,
        }))
    }

    /// Changes the most verbose level forwarded.
    pub fn set(&self, level: Option<Level>) {
        self.0
            .store(level.as_ref().map_or(0, rank), Ordering::Relaxed);
    }

    /// True when events of `level` are forwarded.
    pub fn enabled(&self, level: &Level) -> bool {
        rank(level) <= self.0.load(Ordering::Relaxed)
    }
}

/// The subscriber that forwards events to a sink (see the module
/// documentation): the binding's global `tracing` subscriber.
///
/// It keeps the spans itself rather than in `tracing_subscriber`'s
/// `Registry`, whose thread ids (the `thread_local` and `sharded_slab`
/// crates) are handed out and taken back under process-wide mutexes as
/// threads first log and as they exit. A `fork()` while some thread of the
/// parent held one of those (a librdkafka or tokio thread ending, say)
/// left it locked in the child for good, and the child's first thread to
/// log hung: about one fork in 150 with threads coming and going, which a
/// forked Python child met in CI. Here the spans live in a table made per
/// process (a forked child starts an empty one; the parent's spans are
/// not in it) and each thread's entered spans in a thread-local array
/// without a destructor, so no lock is shared across a fork.
pub struct ForwardSubscriber {
    switch: &'static LevelSwitch,
    sink: fn(LogRecord),
}

impl ForwardSubscriber {
    /// Forwards the events `switch` enables to `sink`.
    pub fn new(switch: &'static LevelSwitch, sink: fn(LogRecord)) -> Self {
        ForwardSubscriber { switch, sink }
    }
}

/// Collects fields as text; the `message` field apart.
struct Collect<'a> {
    message: Option<&'a mut String>,
    fields: &'a mut Vec<(String, String)>,
}

impl Visit for Collect<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}"));
    }
}

impl Collect<'_> {
    fn put(&mut self, field: &Field, value: String) {
        match (&mut self.message, field.name()) {
            (Some(message), "message") => **message = value,
            _ => match self.fields.iter_mut().find(|(k, _)| k == field.name()) {
                Some(slot) => slot.1 = value,
                None => self.fields.push((field.name().to_owned(), value)),
            },
        }
    }
}

impl Subscriber for ForwardSubscriber {
    fn register_callsite(&self, _metadata: &'static Metadata<'static>) -> Interest {
        // Asked again at every event: the switch may change.
        Interest::sometimes()
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        // Spans are always recorded, so that an enabled event has its
        // member's context.
        metadata.is_span() || self.switch.enabled(metadata.level())
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut fields = Vec::new();
        attrs.record(&mut Collect {
            message: None,
            fields: &mut fields,
        });
        let parent = match attrs.parent() {
            Some(p) => Some(p.into_u64()),
            None if attrs.is_contextual() => spans::current(),
            None => None,
        };
        Id::from_u64(spans::open(attrs.metadata(), parent, fields))
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        spans::with_fields(span.into_u64(), |fields| {
            values.record(&mut Collect {
                message: None,
                fields,
            });
        });
    }

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut message = String::new();
        let mut fields = Vec::new();
        event.record(&mut Collect {
            message: Some(&mut message),
            fields: &mut fields,
        });
        let within = match event.parent() {
            Some(p) => Some(p.into_u64()),
            None if event.is_contextual() => spans::current(),
            None => None,
        };
        let context = within.map(spans::context).unwrap_or_default();
        let metadata = event.metadata();
        (self.sink)(LogRecord {
            level: *metadata.level(),
            target: metadata.target().to_owned(),
            file: metadata.file().map(str::to_owned),
            line: metadata.line(),
            message,
            fields,
            context,
        });
    }

    fn enter(&self, span: &Id) {
        spans::enter(span.into_u64());
    }

    fn exit(&self, span: &Id) {
        spans::exit(span.into_u64());
    }

    fn clone_span(&self, id: &Id) -> Id {
        spans::clone(id.into_u64());
        id.clone()
    }

    fn try_close(&self, id: Id) -> bool {
        spans::close(id.into_u64())
    }

    fn current_span(&self) -> Current {
        spans::current()
            .and_then(|id| spans::metadata(id).map(|m| Current::new(Id::from_u64(id), m)))
            .unwrap_or_else(Current::none)
    }
}

/// Installs `subscriber` as this binary's global `tracing` subscriber.
/// False when one was installed already (it stays).
pub fn install(subscriber: ForwardSubscriber) -> bool {
    tracing::subscriber::set_global_default(subscriber).is_ok()
}

/// Queues log records and delivers them in batches from a thread of its
/// own, one per process (see the module documentation).
pub struct Forwarder {
    queue: PerProcess<SyncSender<LogRecord>>,
    dropped: AtomicU64,
    thread_name: &'static str,
    capacity: usize,
    deliver: fn(Vec<LogRecord>),
}

impl Forwarder {
    /// A forwarder whose thread is named `thread_name`, queues up to
    /// `capacity` records, and calls `deliver` with each batch.
    pub const fn new(
        thread_name: &'static str,
        capacity: usize,
        deliver: fn(Vec<LogRecord>),
    ) -> Self {
        Forwarder {
            queue: PerProcess::new(),
            dropped: AtomicU64::new(0),
            thread_name,
            capacity,
            deliver,
        }
    }

    /// Queues `record` without blocking; a record that does not fit (or
    /// finds no thread) is counted, and the count is reported in the next
    /// batch delivered.
    pub fn send(&'static self, record: LogRecord) {
        let queued = self
            .queue
            .get_or_try_init(|| self.start())
            .map(|tx| tx.try_send(record).is_ok())
            .unwrap_or(false);
        if !queued {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn start(&'static self) -> std::io::Result<SyncSender<LogRecord>> {
        let (tx, rx) = sync_channel(self.capacity.max(1));
        std::thread::Builder::new()
            .name(self.thread_name.to_owned())
            .spawn(move || self.run(rx))?;
        Ok(tx)
    }

    fn run(&self, rx: Receiver<LogRecord>) {
        while let Ok(first) = rx.recv() {
            let mut batch = vec![first];
            batch.extend(rx.try_iter());
            let dropped = self.dropped.swap(0, Ordering::Relaxed);
            if dropped > 0 {
                batch.push(LogRecord::dropped(dropped));
            }
            (self.deliver)(batch);
        }
    }

    /// Records dropped and not yet reported.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    static SEEN: Mutex<Vec<LogRecord>> = Mutex::new(Vec::new());

    fn sink(r: LogRecord) {
        SEEN.lock().unwrap().push(r);
    }

    #[test]
    fn records_carry_message_fields_and_member_context_at_the_switched_levels() {
        static SWITCH: LevelSwitch = LevelSwitch::new(Some(Level::WARN));
        let subscriber = ForwardSubscriber::new(&SWITCH, sink);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("member", role = "billing", member = "host-a");
            let _in = span.enter();
            tracing::warn!(failures = 2, error = %"refused", "renewal failing");
            tracing::info!("not forwarded at WARN");
            SWITCH.set(Some(Level::DEBUG));
            tracing::debug!(target: "librdkafka", "now forwarded");
            SWITCH.set(None);
            tracing::error!("nothing is forwarded");
        });
        let seen = std::mem::take(&mut *SEEN.lock().unwrap());
        assert_eq!(seen.len(), 2, "{seen:?}");
        let r = &seen[0];
        assert_eq!(r.level, Level::WARN);
        assert_eq!(r.message, "renewal failing");
        assert_eq!(
            r.fields,
            [
                ("failures".to_owned(), "2".to_owned()),
                ("error".to_owned(), "refused".to_owned())
            ]
        );
        assert_eq!(
            r.context,
            [
                ("role".to_owned(), "billing".to_owned()),
                ("member".to_owned(), "host-a".to_owned())
            ]
        );
        assert_eq!(
            r.text(),
            "role=billing member=host-a: renewal failing failures=2 error=refused"
        );
        assert!(r.target.ends_with("log::tests"), "{}", r.target);
        assert!(
            r.file.as_deref().is_some_and(|f| f.ends_with("log.rs")),
            "{:?}",
            r.file
        );
        assert!(r.line.is_some());
        assert_eq!(
            (seen[1].level, seen[1].target.as_str()),
            (Level::DEBUG, "librdkafka")
        );
        assert_eq!(seen[1].text(), "role=billing member=host-a: now forwarded");
    }

    #[test]
    fn the_switch_orders_levels() {
        let s = LevelSwitch::new(Some(Level::INFO));
        assert!(s.enabled(&Level::ERROR) && s.enabled(&Level::INFO));
        assert!(!s.enabled(&Level::DEBUG));
        s.set(Some(Level::TRACE));
        assert!(s.enabled(&Level::TRACE));
        s.set(None);
        assert!(!s.enabled(&Level::ERROR));
    }

    static DELIVERED: Mutex<Vec<Vec<String>>> = Mutex::new(Vec::new());
    static GATE: Mutex<()> = Mutex::new(());

    fn deliver(batch: Vec<LogRecord>) {
        let _wait = GATE.lock().unwrap();
        DELIVERED
            .lock()
            .unwrap()
            .push(batch.into_iter().map(|r| r.message).collect());
    }

    fn record(message: &str) -> LogRecord {
        LogRecord {
            level: Level::INFO,
            target: "t".into(),
            file: None,
            line: None,
            message: message.into(),
            fields: vec![],
            context: vec![],
        }
    }

    #[test]
    fn the_forwarder_batches_and_reports_what_did_not_fit() {
        static FORWARDER: Forwarder = Forwarder::new("test-log", 2, deliver);
        // Hold the delivery so that the queue fills up.
        let gate = GATE.lock().unwrap();
        FORWARDER.send(record("a"));
        // The thread takes "a" and waits at the gate; two more fit.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut sent = 1;
        while FORWARDER.dropped() == 0 {
            assert!(Instant::now() < deadline, "the queue never filled");
            FORWARDER.send(record(&format!("r{sent}")));
            sent += 1;
        }
        drop(gate);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let delivered = DELIVERED.lock().unwrap().concat();
            if delivered.iter().any(|m| m.contains("were dropped")) {
                // Every record is either delivered or counted as dropped.
                let dropped: u64 = delivered
                    .iter()
                    .filter_map(|m| m.split(' ').next()?.parse::<u64>().ok())
                    .sum();
                let kept = delivered
                    .iter()
                    .filter(|m| !m.contains("were dropped"))
                    .count() as u64;
                assert_eq!(kept + dropped, sent as u64, "{delivered:?}");
                assert_eq!(delivered[0], "a");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "nothing reported the drop: {delivered:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
