//! The accept loop and the per-connection request loop.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::{lock, response_frame, Config, Reply, Request, RequestSummary, Shared};

/// Kafka's `UNSUPPORTED_VERSION` error code.
const UNSUPPORTED_VERSION: i16 = 35;

/// The largest request frame the fake accepts (Kafka's default
/// `socket.request.max.bytes`, 100 MiB); a larger announced size is recorded
/// as a failure and closes the connection.
const MAX_REQUEST_SIZE: usize = 104_857_600;

/// Accepts connections until aborted; the connections live in a `JoinSet`
/// owned here, so aborting this task aborts them all.
pub(super) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // Small frames (a truncated one above all) go out at once.
                    let _ = stream.set_nodelay(true);
                    let index = shared.connections.fetch_add(1, Ordering::SeqCst);
                    shared.changed.notify_waiters();
                    connections.spawn(serve(stream, index, Arc::clone(&shared)));
                }
                Err(e) => {
                    tracing::warn!(target: "fake_broker", "accept: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Records a failure if a connection task unwinds (the script or a
/// [`Reply::Later`] future panicked); the panic message itself is printed
/// by the panic hook.
struct PanicGuard {
    shared: Arc<Shared>,
    connection: usize,
    current: Option<(i16, i16)>,
}

impl Drop for PanicGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let (key, version) = self.current.unwrap_or((-1, -1));
            self.shared.fail(format!(
                "connection {}: panicked while handling api key {key} v{version} (see the panic above)",
                self.connection
            ));
        }
    }
}

/// What a connection does after one reply.
enum Next {
    Read,
    Close,
    Hang,
}

/// Serves one connection: read a frame, script it, do the reply, repeat.
async fn serve(mut stream: TcpStream, connection: usize, shared: Arc<Shared>) {
    let mut guard = PanicGuard {
        shared: Arc::clone(&shared),
        connection,
        current: None,
    };
    let mut index_on_connection = 0;
    loop {
        let frame = match read_frame(&mut stream).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return,
            Err(message) => {
                shared.fail(format!("connection {connection}: {message}"));
                return;
            }
        };
        let request = match parse_request(frame, connection, index_on_connection, &shared) {
            Ok(request) => request,
            Err(message) => {
                shared.fail(format!("connection {connection}: {message}"));
                return;
            }
        };
        shared.changed.notify_waiters();
        guard.current = Some((request.api_key, request.api_version));
        let reply = (shared.script)(&request);
        let next = perform(&mut stream, &shared, &request, reply).await;
        guard.current = None;
        match next {
            Next::Read => index_on_connection += 1,
            Next::Close => {
                let _ = stream.shutdown().await;
                return;
            }
            Next::Hang => std::future::pending::<()>().await,
        }
    }
}

/// Reads one size-prefixed frame: `Ok(None)` on a clean EOF (or an EOF or
/// reset in the middle of a frame: a client may give up mid-write), `Err`
/// for a size no broker would read.
async fn read_frame(stream: &mut TcpStream) -> Result<Option<Bytes>, String> {
    let mut size = [0u8; 4];
    if stream.read_exact(&mut size).await.is_err() {
        return Ok(None);
    }
    let size = i32::from_be_bytes(size);
    let len = usize::try_from(size)
        .ok()
        .filter(|&len| (8..=MAX_REQUEST_SIZE).contains(&len))
        .ok_or_else(|| format!("request frame with bad size {size}"))?;
    let mut frame = vec![0u8; len];
    if stream.read_exact(&mut frame).await.is_err() {
        return Ok(None);
    }
    Ok(Some(Bytes::from(frame)))
}

/// Splits a frame into the request header and body, and logs it.
fn parse_request(
    frame: Bytes,
    connection: usize,
    index_on_connection: usize,
    shared: &Shared,
) -> Result<Request, String> {
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let api_version = i16::from_be_bytes([frame[2], frame[3]]);
    // An unknown API gets header v1, a prefix of v2 anyway.
    let header_version = ApiKey::try_from(api_key)
        .map(|key| key.request_header_version(api_version))
        .unwrap_or(1);
    let mut body = frame;
    let header = RequestHeader::decode(&mut body, header_version)
        .map_err(|e| format!("api key {api_key} v{api_version}: bad request header: {e}"))?;
    let mut log = lock(&shared.log);
    let key_index = log.iter().filter(|r| r.api_key == api_key).count();
    log.push(RequestSummary {
        api_key,
        api_version,
        correlation_id: header.correlation_id,
        connection,
        index_on_connection,
        at: Instant::now(),
    });
    Ok(Request {
        api_key,
        api_version,
        correlation_id: header.correlation_id,
        client_id: header.client_id.map(|id| id.to_string()),
        connection,
        index_on_connection,
        key_index,
        body,
    })
}

/// Does `reply` to `request` on `stream`.
async fn perform(stream: &mut TcpStream, shared: &Shared, request: &Request, reply: Reply) -> Next {
    let mut reply = reply;
    loop {
        let (bytes, next) = match reply {
            Reply::Default => {
                reply = default_reply(&shared.config, request);
                continue;
            }
            Reply::Delay(after, inner) => {
                tokio::time::sleep(after).await;
                reply = *inner;
                continue;
            }
            Reply::Later(future) => {
                reply = future.await;
                continue;
            }
            Reply::Respond(body) => {
                let frame = response_frame(
                    request.api_key,
                    request.api_version,
                    request.correlation_id,
                    &body,
                );
                (frame, Next::Read)
            }
            Reply::Silence => return Next::Read,
            Reply::Close => return Next::Close,
            Reply::Stall => return Next::Hang,
            Reply::Raw(bytes) => (bytes, Next::Read),
            Reply::RawThenHang(bytes) => (bytes, Next::Hang),
            Reply::RawThenClose(bytes) => (bytes, Next::Close),
            Reply::ScriptError(message) => {
                shared.fail(format!(
                    "connection {}: answering api key {} v{}: {message}",
                    request.connection, request.api_key, request.api_version
                ));
                return Next::Close;
            }
        };
        return match stream.write_all(&bytes).await {
            Ok(()) => next,
            // The client went away; nothing to tell it.
            Err(_) => Next::Close,
        };
    }
}

/// What a healthy broker does (see [`Reply::Default`]); never `Default`.
fn default_reply(config: &Config, request: &Request) -> Reply {
    let listed = config
        .api_versions
        .iter()
        .find(|(key, _, _)| *key == request.api_key)
        .copied();
    if request.key() == Some(ApiKey::ApiVersions) {
        let (key, min, max) = listed.unwrap_or((request.api_key, 0, 3));
        if (min..=max.min(4)).contains(&request.api_version) {
            let table = config
                .api_versions
                .iter()
                .map(|&(key, min, max)| {
                    ApiVersion::default()
                        .with_api_key(key)
                        .with_min_version(min)
                        .with_max_version(max)
                })
                .collect();
            let answer = ApiVersionsResponse::default().with_api_keys(table);
            return Reply::message(&answer, request.api_version);
        }
        // Kafka answers an unsupported ApiVersions version in v0, naming
        // only the ApiVersions range, so the client can retry lower.
        let answer = ApiVersionsResponse::default()
            .with_error_code(UNSUPPORTED_VERSION)
            .with_api_keys(vec![ApiVersion::default()
                .with_api_key(key)
                .with_min_version(min)
                .with_max_version(max)]);
        let mut body = BytesMut::new();
        return match answer.encode(&mut body, 0) {
            Ok(()) => Reply::Raw(response_frame(
                request.api_key,
                0,
                request.correlation_id,
                &body,
            )),
            Err(e) => Reply::ScriptError(format!("encoding ApiVersionsResponse v0: {e}")),
        };
    }
    match listed {
        Some((_, min, max)) if !(min..=max).contains(&request.api_version) => Reply::Close,
        _ => Reply::ScriptError(format!(
            "Reply::Default has no answer for api key {} v{}; script it",
            request.api_key, request.api_version
        )),
    }
}
