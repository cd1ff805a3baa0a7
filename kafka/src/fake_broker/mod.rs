//! A scripted fake Kafka broker for deterministic tests of the request
//! layer.
//!
//! [`FakeBroker::start`] binds a real TCP listener on `127.0.0.1:0` and
//! speaks Kafka's framing (a 4-byte big-endian size, then a request header
//! and body). Every request frame, on any connection, goes to the test's
//! *script*, a `Fn(&Request) -> Reply`, whose [`Reply`] decides what the
//! broker does: answer it ([`Reply::Respond`], [`Reply::of`]), answer it as
//! a healthy broker would ([`Reply::Default`], which answers ApiVersions
//! from the configured table), answer later ([`Reply::Delay`],
//! [`Reply::Later`]), never answer it ([`Reply::Silence`]), stop reading
//! ([`Reply::Stall`]), close the connection ([`Reply::Close`]) or write
//! arbitrary bytes ([`Reply::Raw`] and friends, for hostile frames).
//!
//! Like a real broker, the fake handles a connection's requests one at a
//! time and in order: it reads the next frame only once the previous one is
//! answered (or silenced), so a delayed answer delays everything behind it
//! on that connection, while other connections go on.
//!
//! The answer builders ([`find_coordinator`], [`error_for`],
//! [`init_producer_id`], [`end_txn`], [`sasl_handshake`]) decode the request
//! to echo what a broker echoes (coordinator keys, topics, partitions).
//! They never panic: when they cannot build an answer they return
//! [`Reply::ScriptError`], which the broker records as a failure.
//!
//! # Failures
//!
//! Script mistakes (an answer that fails to encode, [`Reply::Default`] for
//! an API without a default, a panicking script) and client mistakes (a
//! frame with a bad size or an undecodable request header) close the
//! connection and are recorded; [`FakeBroker::failures`] lists them, and
//! dropping a broker with unread failures panics (unless the thread is
//! already panicking), so a test cannot pass by accident.
//! [`FakeBroker::take_failures`] reads and clears them.
//!
//! # Paused time
//!
//! The fake uses `tokio::time` for [`Reply::Delay`] and for the arrival
//! times it logs, so it works under `tokio::time::pause()` (or
//! `#[tokio::test(start_paused = true)]`) on a current-thread runtime: a
//! `Delay` of minutes completes at once in wall time, and the client's
//! timers advance with it. Caveat: a paused runtime auto-advances the clock
//! when it has nothing to do *after* a zero-timeout poll for I/O, so bytes
//! must already be readable when that poll happens. Over loopback on Linux
//! a write is readable on the peer by the time `write` returns, so this
//! holds when the client and the fake share the runtime; do not run the
//! fake on another runtime or thread with a paused clock, or a client
//! timeout may fire before an answer that is already on its way.
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use kafka_protocol::messages::ApiKey;
//! use krabka_kafka::fake_broker::{end_txn, FakeBroker, Reply};
//!
//! // The first EndTxn is read and never answered; the retry succeeds.
//! let broker = FakeBroker::start(|req| match req.key() {
//!     Some(ApiKey::EndTxn) if req.key_index == 0 => Reply::Silence,
//!     Some(ApiKey::EndTxn) => end_txn(req, 0),
//!     _ => Reply::Default,
//! });
//! let _bootstrap = broker.addr(); // "127.0.0.1:<port>"
//! # }
//! ```

mod answers;
mod connection;
#[cfg(test)]
mod tests;

pub use answers::{
    describe_transactions, end_txn, error_for, find_coordinator, frame_with_huge_array_count,
    init_producer_id, metadata, metadata_at_epoch, response_frame, sasl_handshake, truncated,
};

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The (api_key, min_version, max_version) table the fake advertises in its
/// ApiVersions answer unless [`Config::api_versions`] says otherwise.
pub fn default_api_versions() -> Vec<(i16, i16, i16)> {
    [
        (ApiKey::Produce, 0, 11),
        (ApiKey::Fetch, 4, 12),
        (ApiKey::ListOffsets, 2, 8),
        (ApiKey::Metadata, 1, 12),
        (ApiKey::FindCoordinator, 0, 6),
        (ApiKey::InitProducerId, 0, 5),
        (ApiKey::AddPartitionsToTxn, 0, 5),
        (ApiKey::EndTxn, 0, 5),
        (ApiKey::DescribeTransactions, 0, 0),
        (ApiKey::DescribeProducers, 0, 0),
        (ApiKey::AddOffsetsToTxn, 0, 4),
        (ApiKey::TxnOffsetCommit, 0, 5),
        (ApiKey::OffsetFetch, 1, 9),
        (ApiKey::SaslHandshake, 1, 1),
        (ApiKey::SaslAuthenticate, 0, 2),
        (ApiKey::ApiVersions, 0, 3),
    ]
    .into_iter()
    .map(|(key, min, max)| (key as i16, min, max))
    .collect()
}

/// How a [`FakeBroker`] presents itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The broker's node id (reported by [`FakeBroker::node_id`] and
    /// [`FakeBroker::endpoint`]); 1 by default.
    pub node_id: i32,
    /// The (api_key, min_version, max_version) table answered to
    /// ApiVersions; [`default_api_versions`] by default. Its ApiVersions
    /// entry (0..=3 when absent; never above 4, the highest version
    /// kafka-protocol encodes) bounds the ApiVersions versions answered
    /// normally; others get `UNSUPPORTED_VERSION`.
    pub api_versions: Vec<(i16, i16, i16)>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            node_id: 1,
            api_versions: default_api_versions(),
        }
    }
}

/// Where a broker listens, as FindCoordinator and Metadata answers name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The node id.
    pub node_id: i32,
    /// The host name.
    pub host: String,
    /// The port.
    pub port: i32,
}

/// One request frame, as the script sees it.
#[derive(Clone, Debug)]
pub struct Request {
    /// The request's API key (possibly one kafka-protocol does not know).
    pub api_key: i16,
    /// The request's API version.
    pub api_version: i16,
    /// The correlation id from the request header.
    pub correlation_id: i32,
    /// The client id from the request header.
    pub client_id: Option<String>,
    /// Which accepted connection it came on (0-based, in accept order).
    pub connection: usize,
    /// Its index among the requests of that connection (0-based).
    pub index_on_connection: usize,
    /// Its index among the requests with the same API key this broker
    /// received on all connections (0-based): "the second EndTxn" is
    /// `key_index == 1`.
    pub key_index: usize,
    /// The raw body after the request header.
    pub body: Bytes,
}

impl Request {
    /// The API key, if kafka-protocol knows it.
    pub fn key(&self) -> Option<ApiKey> {
        ApiKey::try_from(self.api_key).ok()
    }

    /// Decodes the body as `T` at the request's version, insisting that the
    /// whole body is consumed.
    pub fn decode<T: Decodable>(&self) -> Result<T, DecodeError> {
        let mut buf = self.body.clone();
        let what = || {
            let name = std::any::type_name::<T>();
            format!(
                "{} v{}",
                name.rsplit("::").next().unwrap_or(name),
                self.api_version
            )
        };
        let message = T::decode(&mut buf, self.api_version)
            .map_err(|e| DecodeError(format!("decoding {}: {e}", what())))?;
        if buf.has_remaining() {
            return Err(DecodeError(format!(
                "decoding {}: {} bytes left over",
                what(),
                buf.remaining()
            )));
        }
        Ok(message)
    }
}

/// A request body that did not decode as the asked type.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(String);

/// What the broker logged about one request it read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestSummary {
    /// The API key.
    pub api_key: i16,
    /// The API version.
    pub api_version: i16,
    /// The correlation id.
    pub correlation_id: i32,
    /// Which accepted connection it came on (0-based).
    pub connection: usize,
    /// Its index among the requests of that connection (0-based).
    pub index_on_connection: usize,
    /// When the broker read it (`tokio::time`, so the paused clock in
    /// paused tests). A request queued behind a delayed answer on the same
    /// connection is read, and so stamped, only after that answer.
    pub at: Instant,
}

impl RequestSummary {
    /// Whether this is a request of API `key`.
    pub fn is(&self, key: ApiKey) -> bool {
        self.api_key == key as i16
    }
}

/// A future that yields a [`Reply`], for [`Reply::Later`].
pub type ReplyFuture = Pin<Box<dyn Future<Output = Reply> + Send + 'static>>;

/// What the broker does with one request.
pub enum Reply {
    /// Do what a healthy broker does: answer ApiVersions from
    /// [`Config::api_versions`] (`UNSUPPORTED_VERSION` in a v0 answer above
    /// the advertised range, as Kafka does); close the connection for
    /// another API at a version outside the table, as Kafka does; for
    /// anything else the fake has no answer, so this is a
    /// [`Reply::ScriptError`].
    Default,
    /// Answer with this response body; the broker prepends the size and the
    /// response header (v0 or v1 by the request's API and version).
    Respond(Bytes),
    /// Read the request and never answer it; the connection stays open and
    /// later requests on it are read and scripted as usual.
    Silence,
    /// Close the connection at once (with a FIN; should unread requests
    /// remain in the socket, the kernel resets the connection instead).
    Close,
    /// Write these bytes as they are (the whole frame, size included) and
    /// go on.
    Raw(Bytes),
    /// Write these bytes as they are, then neither read nor write this
    /// connection again (it stays open until the broker drops).
    RawThenHang(Bytes),
    /// Write these bytes as they are, then close the connection.
    RawThenClose(Bytes),
    /// Wait this long (`tokio::time`), then do the inner reply. The
    /// connection's later requests wait too.
    Delay(Duration, Box<Reply>),
    /// Await the future, then do the reply it yields (say, once the test
    /// fires a `oneshot`). The connection's later requests wait too.
    Later(ReplyFuture),
    /// Do not answer, and stop reading this connection from now on (it
    /// stays open until the broker drops).
    Stall,
    /// The script could not build an answer: the broker records this
    /// message as a failure and closes the connection.
    ScriptError(String),
}

impl Reply {
    /// Answers with `message` encoded at `version` (a [`Reply::ScriptError`]
    /// if it does not encode).
    pub fn message<M: Encodable>(message: &M, version: i16) -> Reply {
        let mut body = BytesMut::new();
        match message.encode(&mut body, version) {
            Ok(()) => Reply::Respond(body.freeze()),
            Err(e) => Reply::ScriptError(format!(
                "encoding {} v{version}: {e}",
                std::any::type_name::<M>()
            )),
        }
    }

    /// Answers `request` with `message` encoded at the request's version.
    pub fn of<M: Encodable>(request: &Request, message: &M) -> Reply {
        Reply::message(message, request.api_version)
    }

    /// [`Reply::Delay`] without the boxing.
    pub fn delay(after: Duration, reply: Reply) -> Reply {
        Reply::Delay(after, Box::new(reply))
    }

    /// [`Reply::Later`] without the boxing.
    pub fn later(reply: impl Future<Output = Reply> + Send + 'static) -> Reply {
        Reply::Later(Box::pin(reply))
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Default => f.write_str("Default"),
            Reply::Respond(b) => write!(f, "Respond({} bytes)", b.len()),
            Reply::Silence => f.write_str("Silence"),
            Reply::Close => f.write_str("Close"),
            Reply::Raw(b) => write!(f, "Raw({} bytes)", b.len()),
            Reply::RawThenHang(b) => write!(f, "RawThenHang({} bytes)", b.len()),
            Reply::RawThenClose(b) => write!(f, "RawThenClose({} bytes)", b.len()),
            Reply::Delay(d, r) => f.debug_tuple("Delay").field(d).field(r).finish(),
            Reply::Later(_) => f.write_str("Later(..)"),
            Reply::Stall => f.write_str("Stall"),
            Reply::ScriptError(m) => f.debug_tuple("ScriptError").field(m).finish(),
        }
    }
}

type Script = dyn Fn(&Request) -> Reply + Send + Sync + 'static;

/// State shared by the broker handle, its accept loop and its connections.
struct Shared {
    config: Config,
    script: Box<Script>,
    log: Mutex<Vec<RequestSummary>>,
    connections: AtomicUsize,
    failures: Mutex<Vec<String>>,
    changed: Notify,
}

impl Shared {
    fn fail(&self, message: String) {
        tracing::error!(target: "fake_broker", "{message}");
        lock(&self.failures).push(message);
        self.changed.notify_waiters();
    }
}

/// Locks, ignoring poisoning (a panicking script must not hide the log).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A scripted fake Kafka broker on `127.0.0.1`; dropping it aborts its tasks
/// and so closes its listener and connections (asynchronously, as tokio
/// cancels tasks).
pub struct FakeBroker {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl FakeBroker {
    /// Starts a broker with [`Config::default`] that answers every request
    /// frame with `script`.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, or if `127.0.0.1:0` cannot be bound.
    pub fn start(script: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> FakeBroker {
        FakeBroker::start_with(Config::default(), script)
    }

    /// Starts a broker with `config` that answers every request frame with
    /// `script`.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, or if `127.0.0.1:0` cannot be bound.
    pub fn start_with(
        config: Config,
        script: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    ) -> FakeBroker {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .expect("fake broker: binding 127.0.0.1:0");
        let addr = std_listener.local_addr().expect("fake broker: local_addr");
        let listener = TcpListener::from_std(std_listener).expect("fake broker: tokio listener");
        let shared = Arc::new(Shared {
            config,
            script: Box::new(script),
            log: Mutex::new(Vec::new()),
            connections: AtomicUsize::new(0),
            failures: Mutex::new(Vec::new()),
            changed: Notify::new(),
        });
        let accept = tokio::spawn(connection::accept_loop(listener, Arc::clone(&shared)));
        FakeBroker {
            addr,
            shared,
            accept,
        }
    }

    /// The address to connect to, `"127.0.0.1:<port>"`.
    pub fn addr(&self) -> String {
        self.addr.to_string()
    }

    /// The broker's node id ([`Config::node_id`]).
    pub fn node_id(&self) -> i32 {
        self.shared.config.node_id
    }

    /// The broker's node id, host and port, as a coordinator answer names it.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint {
            node_id: self.node_id(),
            host: self.addr.ip().to_string(),
            port: i32::from(self.addr.port()),
        }
    }

    /// Every request the broker has read so far, in the order it read them.
    pub fn requests(&self) -> Vec<RequestSummary> {
        lock(&self.shared.log).clone()
    }

    /// How many connections the broker has accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Waits until `done` holds for the request log (checked now and after
    /// every request read, connection accepted or failure recorded).
    pub async fn wait_until(&self, done: impl Fn(&[RequestSummary]) -> bool) {
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if done(&self.requests()) {
                return;
            }
            changed.await;
        }
    }

    /// The failures recorded so far (see the module docs).
    pub fn failures(&self) -> Vec<String> {
        lock(&self.shared.failures).clone()
    }

    /// The failures recorded so far, clearing them (so that dropping the
    /// broker does not panic for them).
    pub fn take_failures(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.shared.failures))
    }
}

impl fmt::Debug for FakeBroker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeBroker")
            .field("addr", &self.addr)
            .field("node_id", &self.node_id())
            .finish_non_exhaustive()
    }
}

impl Drop for FakeBroker {
    fn drop(&mut self) {
        self.accept.abort();
        let failures = self.take_failures();
        if !failures.is_empty() && !std::thread::panicking() {
            panic!(
                "fake broker {} recorded failures:\n  {}",
                self.addr,
                failures.join("\n  ")
            );
        }
    }
}
