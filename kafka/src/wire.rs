//! The wire under the protocol client: one connection per
//! broker (TCP, TLS over TCP with `ssl` / `sasl_ssl`) carrying concurrent
//! requests, each with its own correlation id; a writer lock keeps each frame
//! whole on the wire, and a reader task hands each response to the request
//! that waits for it.
//!
//! Opening a connection: TCP connect, the TLS handshake (when on), ApiVersions,
//! then SaslHandshake v1 and SaslAuthenticate (when SASL is on), all within
//! the connect deadline. A failed authentication, an untrusted certificate,
//! a missing mechanism and a failed OAUTHBEARER token provider are
//! [`OpenError::Fail`]; everything else may pass and is [`OpenError::Retry`].
//!
//! A connection that may be out of step (a write that failed, timed out or
//! was abandoned half-way, an undecodable or mismatched response) or stuck
//! (a request without an answer by its deadline) is closed; every waiter
//! then fails, and the client connects again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, ResponseHeader, SaslAuthenticateRequest,
    SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Mutex as AsyncMutex};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::client::code_name;
use crate::codes;
use crate::error::Error;
use crate::oauth::{OAuthToken, TokenSource};
use crate::sasl::{Exchange, Step};
use crate::security::{self, Credentials, SaslSettings, Security};

/// A byte stream to a broker: plain TCP or TLS over TCP.
pub(super) trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}
type BoxedStream = Box<dyn Stream>;

/// Why a connection could not be opened.
#[derive(Debug)]
pub(super) enum OpenError {
    /// The broker may answer later (unreachable, timed out, closed).
    Retry(std::io::Error),
    /// Give up now, with this error: a failed authentication, an untrusted
    /// or misnamed certificate, a mechanism the broker does not enable
    /// (all [`Error::Fatal`]: no retry mends them), or a token provider that
    /// failed (its error says whether a later retry may mend it).
    Fail(Error),
}

impl From<std::io::Error> for OpenError {
    fn from(e: std::io::Error) -> Self {
        OpenError::Retry(e)
    }
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Retry(e) => e.fmt(f),
            OpenError::Fail(e) => e.fmt(f),
        }
    }
}

/// The share of a SASL session's lifetime after which the connection is
/// replaced (the broker closes it at the end, KIP-368); Kafka's Java client
/// re-authenticates between 85 % and 95 %.
const SESSION_USE: f64 = 0.85;

/// The largest response frame accepted (a describe answer is a few hundred bytes).
const MAX_FRAME: usize = 64 * 1024 * 1024;

/// Responses waited for, by correlation id, and why the connection closed.
#[derive(Default)]
pub(super) struct Pending {
    waiters: HashMap<i32, oneshot::Sender<Bytes>>,
    closed: Option<String>,
}

/// The requests a client and its clones have sent: all of them, and the
/// DescribeTransactions among them (a reader's cost, counted apart from
/// the lease path's requests on the same client).
#[derive(Debug, Default)]
pub(super) struct Sent {
    pub(super) all: AtomicU64,
    pub(super) describes: AtomicU64,
}

impl Sent {
    fn count(&self, key: ApiKey) {
        self.all.fetch_add(1, Ordering::Relaxed);
        if key == ApiKey::DescribeTransactions {
            self.describes.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One connection to one broker, shared by concurrent requests.
pub(super) struct Connection {
    pub(super) addr: String,
    client_id: StrBytes,
    writer: AsyncMutex<WriteHalf<BoxedStream>>,
    pending: Arc<StdMutex<Pending>>,
    next_correlation: AtomicI32,
    /// API key → (min, max) version the broker supports.
    versions: HashMap<i16, (i16, i16)>,
    requests: Arc<Sent>,
    reader: JoinHandle<()>,
    /// When the broker will end the SASL session (KIP-368), less a margin:
    /// from then on a new connection is made for new requests.
    session_end: Option<Instant>,
    /// The SASL session lifetime the broker set, if any.
    pub(super) session_lifetime: Option<std::time::Duration>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Connection {
    /// Connects to `addr`, secures the connection as `security` says (TLS,
    /// SASL) and asks for its API versions, all by `deadline`.
    pub(super) async fn open(
        addr: &str,
        client_id: StrBytes,
        requests: Arc<Sent>,
        deadline: Instant,
        security: &Security,
    ) -> Result<Connection, OpenError> {
        let timed_out = |what: &str| {
            OpenError::Retry(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("{what} timed out"),
            ))
        };
        let tcp = tokio::time::timeout_at(deadline, TcpStream::connect(addr))
            .await
            .map_err(|_| timed_out("connect"))??;
        tcp.set_nodelay(true)?;
        let stream: BoxedStream = match &security.tls {
            None => Box::new(tcp),
            Some(tls) => {
                let name = security::server_name(addr).map_err(|e| {
                    OpenError::Fail(Error::InvalidArgument(format!(
                        "broker address {addr}: {e}"
                    )))
                })?;
                let connector = tokio_rustls::TlsConnector::from(Arc::clone(&tls.config));
                let handshake = connector.connect(name, tcp);
                match tokio::time::timeout_at(deadline, handshake).await {
                    Err(_) => return Err(timed_out("TLS handshake")),
                    Ok(Ok(s)) => Box::new(s),
                    Ok(Err(e)) => {
                        let rustls_error = e
                            .get_ref()
                            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
                        return Err(match rustls_error {
                            Some(r) => OpenError::Fail(security::tls_error(addr, tls, r)),
                            None => OpenError::Retry(e),
                        });
                    }
                }
            }
        };
        let (read, write) = tokio::io::split(stream);
        let pending = Arc::new(StdMutex::new(Pending::default()));
        let reader = tokio::spawn(read_loop(read, Arc::clone(&pending)));
        let mut conn = Connection {
            addr: addr.to_owned(),
            client_id,
            writer: AsyncMutex::new(write),
            pending,
            next_correlation: AtomicI32::new(1),
            versions: HashMap::new(),
            requests,
            reader,
            session_end: None,
            session_lifetime: None,
        };
        conn.versions = conn.api_versions(deadline).await?;
        if let Some(sasl) = &security.sasl {
            let started = Instant::now();
            if let Some(lifetime) = conn.authenticate(sasl, deadline).await? {
                tracing::debug!(addr, ?lifetime, "SASL session lifetime (KIP-368)");
                conn.session_end = Some(started + lifetime.mul_f64(SESSION_USE));
                conn.session_lifetime = Some(lifetime);
            }
        }
        Ok(conn)
    }

    /// The highest version of `key` both sides support.
    pub(super) fn version_for(&self, key: ApiKey, ours: (i16, i16)) -> Option<i16> {
        let (min, max) = *self.versions.get(&(key as i16))?;
        let hi = max.min(ours.1);
        let lo = min.max(ours.0);
        (lo <= hi).then_some(hi)
    }

    /// True once the SASL session is near its end: new requests go to a
    /// new connection, while the requests in flight here finish (the
    /// connection goes with the last of them).
    pub(super) fn is_expiring(&self) -> bool {
        self.session_end.is_some_and(|end| Instant::now() >= end)
    }

    pub(super) fn is_closed(&self) -> bool {
        self.closed_because().is_some()
    }

    /// Why the connection closed, once it has.
    fn closed_because(&self) -> Option<String> {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .closed
            .clone()
    }

    fn close(&self, why: String) {
        close_pending(&self.pending, why);
    }

    /// Writes one whole request frame by `deadline`, or closes the
    /// connection: a write that failed, timed out or was abandoned half-way
    /// leaves the stream unusable for any later request.
    async fn write_frame(&self, frame: &[u8], deadline: Instant) -> std::io::Result<()> {
        // A caller that stops waiting mid-write (its future dropped) leaves a
        // half-written frame: the guard then closes the connection, as the
        // timeout path does, so no later request shares a corrupt stream.
        let mut mid_write = CloseUnlessDone {
            conn: self,
            done: false,
            why: "a request was abandoned in the middle of its write",
        };
        let written = tokio::time::timeout_at(deadline, async {
            let mut w = self.writer.lock().await;
            // The writer before this one may have given up half-way through
            // its frame (and closed the connection): nothing more goes on
            // this stream, or the broker would read this frame's bytes as
            // the end of that one.
            if let Some(why) = self.closed_because() {
                return Err(std::io::Error::new(std::io::ErrorKind::NotConnected, why));
            }
            w.write_all(frame).await?;
            // TLS keeps written bytes in its buffer until flushed.
            w.flush().await
        })
        .await;
        mid_write.done = true;
        match written {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                self.close(format!("write failed: {e}"));
                Err(e)
            }
            Err(_) => {
                // A frame may be half written: the connection is unusable.
                self.close("write timed out".into());
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "write timed out",
                ))
            }
        }
    }

    /// Sends one request and waits for its response.
    pub(super) async fn request<Req: Encodable, Resp: Decodable + HeaderVersion>(
        &self,
        key: ApiKey,
        version: i16,
        req: &Req,
        deadline: Instant,
    ) -> std::io::Result<Resp> {
        let correlation_id = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let frame = request_frame(key, version, correlation_id, &self.client_id, req)?;

        let (tx, rx) = oneshot::channel();
        {
            let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(why) = &p.closed {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    why.clone(),
                ));
            }
            p.waiters.insert(correlation_id, tx);
        }
        self.write_frame(&frame, deadline).await?;
        self.requests.count(key);
        // A caller that stops waiting for the response (its future dropped:
        // a long poll cut short) leaves the broker owing it, and a broker
        // answers a connection's requests in order: the next request here
        // would wait behind it. The guard closes the connection then.
        let mut awaiting = CloseUnlessDone {
            conn: self,
            done: false,
            why: "a request was abandoned before its response",
        };
        let answered = tokio::time::timeout_at(deadline, rx).await;
        awaiting.done = true;
        let mut body = match answered {
            Ok(Ok(b)) => b,
            Ok(Err(_)) => {
                let why = self
                    .pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .closed
                    .clone();
                return Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    why.unwrap_or_else(|| "connection closed".into()),
                ));
            }
            Err(_) => {
                // A broker answers a connection's requests in order: every
                // request behind this one waits for it too. The connection
                // is given up (as Kafka's own clients do on a request
                // timeout); its other waiters fail now and go elsewhere.
                self.close(format!("a {key:?} request had no response in time"));
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no response in time",
                ));
            }
        };
        // Every count and length is checked against the bytes left before
        // the decoder sees the frame: kafka-protocol allocates an array's
        // capacity from the count it reads, and a huge count would abort
        // the process.
        let header_version = Resp::header_version(version);
        let layout = match checked_layout(key, version, header_version, &body) {
            Ok(layout) => layout,
            Err(e) => {
                self.close(format!("a malformed {key:?} v{version} response: {e}"));
                return Err(protocol_error(e));
            }
        };
        let header = ResponseHeader::decode(&mut body, header_version).map_err(|e| {
            self.close(format!("undecodable response header: {e}"));
            protocol_error(e)
        })?;
        if header.correlation_id != correlation_id {
            self.close("response correlation id mismatch".into());
            return Err(std::io::Error::other("response correlation id mismatch"));
        }
        Resp::decode(&mut body, layout).map_err(|e| {
            self.close(format!("undecodable {key:?} v{version} response: {e}"));
            protocol_error(e)
        })
    }
}

/// Closes the connection, for `why`, when dropped before `done` is set.
struct CloseUnlessDone<'a> {
    conn: &'a Connection,
    done: bool,
    why: &'static str,
}

impl Drop for CloseUnlessDone<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.conn.close(self.why.into());
        }
    }
}

pub(super) fn protocol_error(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
}

fn close_pending(pending: &StdMutex<Pending>, why: String) {
    let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
    if p.closed.is_none() {
        p.closed = Some(why);
    }
    // Dropping the senders wakes every waiter with an error.
    p.waiters.clear();
}

/// Reads response frames and hands each to the request waiting for it.
async fn read_loop(mut read: ReadHalf<BoxedStream>, pending: Arc<StdMutex<Pending>>) {
    let why = loop {
        let size = match read.read_i32().await {
            Ok(s) => s,
            Err(e) => break format!("read failed: {e}"),
        };
        if size < 4 || size as usize > MAX_FRAME {
            break bad_frame(size);
        }
        let mut buf = vec![0u8; size as usize];
        if let Err(e) = read.read_exact(&mut buf).await {
            break format!("read failed: {e}");
        }
        let mut body = Bytes::from(buf);
        let correlation_id = body.clone().get_i32();
        let waiter = pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .waiters
            .remove(&correlation_id);
        if let Some(tx) = waiter {
            // The waiter may have timed out and gone: nothing to do then.
            let _ = tx.send(std::mem::take(&mut body));
        }
    };
    close_pending(&pending, why);
}

mod frame;
mod handshake;

use frame::{bad_frame, checked_layout, request_frame};

#[cfg(test)]
mod tests;
