//! The wire under the DescribeTransactions client: one connection per
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
//! was abandoned half-way, an undecodable or mismatched response) is closed;
//! every waiter then fails, and the client connects again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{
    encode_request_header_into_buffer, Decodable, Encodable, HeaderVersion, StrBytes,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Mutex as AsyncMutex};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::describe::code_name;
use super::oauth::{OAuthToken, TokenSource};
use super::sasl::{Exchange, Step};
use super::security::{self, Credentials, SaslSettings, Security};
use crate::error::Error;

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

/// One connection to one broker, shared by concurrent requests.
pub(super) struct Connection {
    pub(super) addr: String,
    client_id: StrBytes,
    writer: AsyncMutex<WriteHalf<BoxedStream>>,
    pending: Arc<StdMutex<Pending>>,
    next_correlation: AtomicI32,
    /// API key → (min, max) version the broker supports.
    versions: HashMap<i16, (i16, i16)>,
    requests: Arc<AtomicU64>,
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
        requests: Arc<AtomicU64>,
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

    /// SaslHandshake v1 then SaslAuthenticate until the mechanism is done
    /// (KIP-152). Returns the session lifetime the broker set, if any.
    async fn authenticate(
        &self,
        sasl: &SaslSettings,
        deadline: Instant,
    ) -> Result<Option<std::time::Duration>, OpenError> {
        let context = || {
            format!(
                "SASL {} authentication with {} at {}",
                sasl.mechanism,
                sasl.who(),
                self.addr
            )
        };
        let fatal = |why: String| OpenError::Fail(Error::fatal(context(), why));
        if self.version_for(ApiKey::SaslHandshake, (1, 1)).is_none() {
            return Err(fatal(
                "the broker does not speak SaslHandshake v1 (Kafka 1.0 or newer is needed)".into(),
            ));
        }
        let Some(auth_version) = self.version_for(ApiKey::SaslAuthenticate, (0, 2)) else {
            return Err(fatal("the broker does not speak SaslAuthenticate".into()));
        };
        let mut req = SaslHandshakeRequest::default();
        req.mechanism = StrBytes::from_static_str(sasl.mechanism.name());
        let resp: SaslHandshakeResponse = self
            .request(ApiKey::SaslHandshake, 1, &req, deadline)
            .await?;
        match resp.error_code {
            0 => {}
            33 => {
                let enabled: Vec<&str> = resp.mechanisms.iter().map(|m| m.as_str()).collect();
                return Err(fatal(format!(
                    "the broker does not enable the mechanism {} on this listener (it enables: {})",
                    sasl.mechanism,
                    enabled.join(", ")
                )));
            }
            code => return Err(fatal(format!("SaslHandshake answered {}", code_name(code)))),
        }
        let (mut exchange, first) = match &sasl.credentials {
            Credentials::Token(source) => {
                let token = self.token(source, deadline).await?;
                Exchange::oauth(token.value())
            }
            Credentials::Password { .. } => Exchange::start(sasl).map_err(fatal)?,
        };
        let mut out = first;
        loop {
            let mut req = SaslAuthenticateRequest::default();
            req.auth_bytes = Bytes::from(std::mem::take(&mut out));
            let resp: SaslAuthenticateResponse = self
                .request(ApiKey::SaslAuthenticate, auth_version, &req, deadline)
                .await?;
            if resp.error_code != 0 {
                // The broker's message names the mechanism, never the password.
                return Err(fatal(format!(
                    "the broker refused the credentials: {}{}{}",
                    code_name(resp.error_code),
                    resp.error_message
                        .as_ref()
                        .map(|m| format!(": {}", m.as_str()))
                        .unwrap_or_default(),
                    exchange
                        .refusal()
                        .map(|r| format!(" (the broker's answer to the token: {r})"))
                        .unwrap_or_default()
                )));
            }
            match exchange.step(&resp.auth_bytes).map_err(fatal)? {
                Step::Send(next) => out = next,
                Step::Done => {
                    let lifetime = u64::try_from(resp.session_lifetime_ms)
                        .ok()
                        .filter(|ms| *ms > 0)
                        .map(std::time::Duration::from_millis);
                    return Ok(lifetime);
                }
            }
        }
    }

    /// A token from the OAUTHBEARER token provider (which may block) on
    /// tokio's blocking pool, by `deadline`.
    async fn token(
        &self,
        source: &Arc<TokenSource>,
        deadline: Instant,
    ) -> Result<OAuthToken, OpenError> {
        let source = Arc::clone(source);
        match tokio::time::timeout_at(
            deadline,
            tokio::task::spawn_blocking(move || source.token()),
        )
        .await
        {
            Ok(Ok(Ok(token))) => Ok(token),
            Ok(Ok(Err(e))) => Err(OpenError::Fail(e)),
            Ok(Err(join)) => Err(OpenError::Fail(Error::fatal(
                "getting an OAUTHBEARER token from the token provider",
                join.to_string(),
            ))),
            Err(_) => Err(OpenError::Retry(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the OAUTHBEARER token provider did not answer within the connect timeout",
            ))),
        }
    }

    async fn api_versions(&self, deadline: Instant) -> std::io::Result<HashMap<i16, (i16, i16)>> {
        let mut req = ApiVersionsRequest::default();
        req.client_software_name = StrBytes::from_static_str("krabka-coordination");
        req.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
        let mut resp: ApiVersionsResponse =
            self.request(ApiKey::ApiVersions, 3, &req, deadline).await?;
        if resp.error_code == 35 {
            // UNSUPPORTED_VERSION: an old broker; v0 has no body fields.
            resp = self.request(ApiKey::ApiVersions, 0, &req, deadline).await?;
        }
        if resp.error_code != 0 {
            return Err(std::io::Error::other(format!(
                "ApiVersions answered {}",
                code_name(resp.error_code)
            )));
        }
        Ok(resp
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect())
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

    /// How many requests wait for their answers.
    pub(super) fn in_flight(&self) -> usize {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .waiters
            .len()
    }

    pub(super) fn is_closed(&self) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .closed
            .is_some()
    }

    fn close(&self, why: String) {
        close_pending(&self.pending, why);
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
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(self.client_id.clone());
        let mut frame = BytesMut::with_capacity(128);
        frame.put_i32(0); // the size, filled in below
        encode_request_header_into_buffer(&mut frame, &header).map_err(protocol_error)?;
        req.encode(&mut frame, version).map_err(protocol_error)?;
        let size = i32::try_from(frame.len() - 4)
            .map_err(|_| std::io::Error::other("request too large"))?;
        frame[..4].copy_from_slice(&size.to_be_bytes());

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
        // A caller that stops waiting mid-write (its future dropped) leaves a
        // half-written frame: the guard then closes the connection, as the
        // timeout path does, so no later request shares a corrupt stream.
        let mut mid_write = CloseUnlessDone {
            conn: self,
            done: false,
        };
        let written = tokio::time::timeout_at(deadline, async {
            let mut w = self.writer.lock().await;
            w.write_all(&frame).await?;
            // TLS keeps written bytes in its buffer until flushed.
            w.flush().await
        })
        .await;
        mid_write.done = true;
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                self.close(format!("write failed: {e}"));
                return Err(e);
            }
            Err(_) => {
                // A frame may be half written: the connection is unusable.
                self.close("write timed out".into());
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "write timed out",
                ));
            }
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        let mut body = match tokio::time::timeout_at(deadline, rx).await {
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
                self.pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .waiters
                    .remove(&correlation_id);
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no response in time",
                ));
            }
        };
        let header =
            ResponseHeader::decode(&mut body, Resp::header_version(version)).map_err(|e| {
                self.close(format!("undecodable response header: {e}"));
                protocol_error(e)
            })?;
        if header.correlation_id != correlation_id {
            self.close("response correlation id mismatch".into());
            return Err(std::io::Error::other("response correlation id mismatch"));
        }
        Resp::decode(&mut body, version).map_err(|e| {
            self.close(format!("undecodable {key:?} v{version} response: {e}"));
            protocol_error(e)
        })
    }
}

/// Closes the connection when dropped before `done` is set.
struct CloseUnlessDone<'a> {
    conn: &'a Connection,
    done: bool,
}

impl Drop for CloseUnlessDone<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.conn
                .close("a request was abandoned in the middle of its write".into());
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
            break format!("bad response frame size {size}");
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kafka_protocol::messages::{DescribeTransactionsRequest, TransactionalId};
    use tokio::net::TcpListener;

    use super::*;

    /// A broker that answers one ApiVersions request, then never reads again.
    async fn stalling_broker() -> (String, JoinHandle<TcpStream>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let size = s.read_i32().await.unwrap();
            let mut buf = vec![0u8; size as usize];
            s.read_exact(&mut buf).await.unwrap();
            let mut req = Bytes::from(buf);
            let _key = req.get_i16();
            let _version = req.get_i16();
            let correlation_id = req.get_i32();
            let mut body = BytesMut::new();
            body.put_i32(correlation_id); // response header v0
                                          // ApiVersionsResponse v3: no error, no API keys, no throttle,
                                          // no tagged fields.
            body.put_i16(0);
            body.put_u8(1); // compact array of 0 elements
            body.put_i32(0);
            body.put_u8(0);
            s.write_i32(body.len() as i32).await.unwrap();
            s.write_all(&body).await.unwrap();
            s // kept open, never read again
        });
        (addr, task)
    }

    #[tokio::test]
    async fn a_request_abandoned_mid_write_closes_its_connection() {
        let (addr, broker) = stalling_broker().await;
        let far = Instant::now() + Duration::from_secs(60);
        let conn = Connection::open(
            &addr,
            StrBytes::from_static_str("test"),
            Arc::default(),
            far,
            &Security::plaintext(),
        )
        .await
        .unwrap();
        assert!(!conn.is_closed());
        // Far more than the socket buffers hold: the write cannot finish
        // while the broker does not read.
        let mut req = DescribeTransactionsRequest::default();
        req.transactional_ids = (0..2048)
            .map(|i| TransactionalId(StrBytes::from_string(format!("{i:0>16384}"))))
            .collect();
        let request =
            conn.request::<_, ApiVersionsResponse>(ApiKey::DescribeTransactions, 0, &req, far);
        tokio::select! {
            _ = request => panic!("the write finished although the broker never reads"),
            _ = tokio::time::sleep(Duration::from_millis(300)) => {}
        }
        assert!(
            conn.is_closed(),
            "a half-written frame must not stay on a shared connection"
        );
        drop(broker);
    }

    /// Reads one request frame: (api key, version, correlation id, body).
    async fn read_request(s: &mut TcpStream) -> (i16, i16, i32, Bytes) {
        let size = s.read_i32().await.unwrap();
        let mut buf = vec![0u8; size as usize];
        s.read_exact(&mut buf).await.unwrap();
        let mut req = Bytes::from(buf);
        let key = req.get_i16();
        let version = req.get_i16();
        let correlation_id = req.get_i32();
        (key, version, correlation_id, req)
    }

    async fn respond(s: &mut TcpStream, correlation_id: i32, body: &[u8]) {
        s.write_i32(body.len() as i32 + 4).await.unwrap();
        s.write_i32(correlation_id).await.unwrap(); // response header v0
        s.write_all(body).await.unwrap();
    }

    /// A broker that takes SASL PLAIN from `user`/`password` and gives the
    /// session `lifetime_ms` (KIP-368), or refuses other credentials with
    /// SASL_AUTHENTICATION_FAILED; then keeps the connection open.
    async fn sasl_broker(lifetime_ms: i64) -> (String, JoinHandle<TcpStream>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            // ApiVersions v3: SaslHandshake 0..1, SaslAuthenticate 0..1.
            let (key, _, id, _) = read_request(&mut s).await;
            assert_eq!(key, ApiKey::ApiVersions as i16);
            let mut body = BytesMut::new();
            body.put_i16(0);
            body.put_u8(3); // compact array of 2
            for k in [ApiKey::SaslHandshake, ApiKey::SaslAuthenticate] {
                body.put_i16(k as i16);
                body.put_i16(0);
                body.put_i16(1);
                body.put_u8(0);
            }
            body.put_i32(0);
            body.put_u8(0);
            respond(&mut s, id, &body).await;
            // SaslHandshake v1: PLAIN.
            let (key, version, id, _) = read_request(&mut s).await;
            assert_eq!((key, version), (ApiKey::SaslHandshake as i16, 1));
            let mut body = BytesMut::new();
            body.put_i16(0);
            body.put_i32(1);
            body.put_i16(5);
            body.put_slice(b"PLAIN");
            respond(&mut s, id, &body).await;
            // SaslAuthenticate v1, not flexible: the header has a client id.
            let (key, version, id, mut req) = read_request(&mut s).await;
            assert_eq!((key, version), (ApiKey::SaslAuthenticate as i16, 1));
            let client_id_len = req.get_i16();
            req.advance(client_id_len.max(0) as usize);
            let len = req.get_i32() as usize;
            let ok = req[..len] == *b"\0alice\0pw";
            let mut body = BytesMut::new();
            if ok {
                body.put_i16(0);
                body.put_i16(-1); // no error message
            } else {
                body.put_i16(58);
                let msg = b"Authentication failed: Invalid username or password";
                body.put_i16(msg.len() as i16);
                body.put_slice(msg);
            }
            body.put_i32(0); // no auth bytes
            body.put_i64(lifetime_ms);
            respond(&mut s, id, &body).await;
            s
        });
        (addr, task)
    }

    fn plain(password: &str) -> Security {
        Security {
            protocol: super::super::security::Protocol::SaslPlaintext,
            tls: None,
            sasl: Some(SaslSettings::password(
                super::super::security::Mechanism::Plain,
                "alice",
                password,
            )),
        }
    }

    #[tokio::test]
    async fn a_sasl_session_lifetime_retires_the_connection_before_it_ends() {
        let (addr, broker) = sasl_broker(1000).await;
        let far = Instant::now() + Duration::from_secs(60);
        let requests = Arc::new(AtomicU64::new(0));
        let conn = Connection::open(
            &addr,
            StrBytes::from_static_str("test"),
            Arc::clone(&requests),
            far,
            &plain("pw"),
        )
        .await
        .unwrap();
        assert_eq!(
            requests.load(Ordering::Relaxed),
            3,
            "ApiVersions, SaslHandshake, SaslAuthenticate"
        );
        assert!(!conn.is_expiring());
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert!(conn.is_expiring(), "retired at 85 % of the 1 s session");
        assert!(
            !conn.is_closed(),
            "requests in flight may still finish on it"
        );
        drop(broker);
    }

    #[tokio::test]
    async fn a_refused_password_is_fatal_and_names_mechanism_and_user() {
        let (addr, broker) = sasl_broker(0).await;
        let far = Instant::now() + Duration::from_secs(60);
        let e = match Connection::open(
            &addr,
            StrBytes::from_static_str("test"),
            Arc::default(),
            far,
            &plain("wrong-pw"),
        )
        .await
        {
            Err(OpenError::Fail(e)) => e,
            Err(e) => panic!("not fatal: {e}"),
            Ok(_) => panic!("authenticated with a wrong password"),
        };
        let msg = e.to_string();
        assert!(
            msg.contains("SASL PLAIN") && msg.contains("\"alice\""),
            "{msg}"
        );
        assert!(msg.contains("Invalid username or password"), "{msg}");
        assert!(!msg.contains("wrong-pw"), "{msg}");
        drop(broker);
    }
}
