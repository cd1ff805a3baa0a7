use std::time::Duration;

use kafka_protocol::messages::{DescribeTransactionsRequest, TransactionalId};
use tokio::net::TcpListener;

use bytes::{BufMut, BytesMut};

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

async fn plaintext_open(addr: &str) -> Result<Connection, OpenError> {
    Connection::open(
        addr,
        StrBytes::from_static_str("test"),
        Arc::default(),
        Instant::now() + Duration::from_secs(10),
        &Security::plaintext(),
    )
    .await
}

#[tokio::test]
async fn a_response_with_a_huge_array_count_is_refused_before_it_is_decoded() {
    use crate::fake_broker::{frame_with_huge_array_count, response_frame, FakeBroker, Reply};
    // An ApiVersions v3 answer whose compact api_keys count is u32::MAX:
    // kafka-protocol would ask for that many entries' capacity and abort
    // the process.
    let mut v3 = BytesMut::new();
    v3.put_i16(0);
    v3.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    let v3 = v3.freeze();
    let broker = FakeBroker::start(move |r| {
        Reply::RawThenHang(response_frame(
            r.api_key,
            r.api_version,
            r.correlation_id,
            &v3,
        ))
    });
    let e = match plaintext_open(&broker.addr()).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a connection was made on a hostile ApiVersions answer"),
    };
    assert!(e.contains("api_keys") && e.contains("4294967294"), "{e}");
    // The same in version 0's layout (an i32 count of 0x7fff_ffff).
    let broker =
        FakeBroker::start(|r| Reply::RawThenHang(frame_with_huge_array_count(r.correlation_id)));
    let e = match plaintext_open(&broker.addr()).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a connection was made on a hostile ApiVersions answer"),
    };
    assert!(e.contains("api_keys"), "{e}");
}

#[tokio::test]
async fn an_unsupported_version_answer_to_api_versions_is_read_as_version_0() {
    use crate::fake_broker::{Config, FakeBroker, Reply};
    // A broker whose ApiVersions stops at v2 answers v3 with a v0 body
    // (error 35); the client asks again at v0.
    let config = Config {
        api_versions: vec![(18, 0, 2)],
        ..Config::default()
    };
    let broker = FakeBroker::start_with(config, |_| Reply::Default);
    let conn = plaintext_open(&broker.addr())
        .await
        .expect("connected at v0");
    assert_eq!(conn.version_for(ApiKey::ApiVersions, (0, 3)), Some(2));
    let asked: Vec<i16> = broker.requests().iter().map(|r| r.api_version).collect();
    assert_eq!(asked, vec![3, 0]);
}

#[tokio::test]
async fn a_request_abandoned_before_its_response_closes_its_connection() {
    use crate::fake_broker::{FakeBroker, Reply};
    // The broker reads the request and never answers (as a long poll that
    // has not ended yet): the caller stops waiting, so the broker still
    // owes the response, and every later request on this connection would
    // wait behind it.
    let broker = FakeBroker::start(|r| {
        if r.api_key == ApiKey::ApiVersions as i16 {
            Reply::Default
        } else {
            Reply::Silence
        }
    });
    let conn = plaintext_open(&broker.addr()).await.unwrap();
    let far = Instant::now() + Duration::from_secs(60);
    let req = DescribeTransactionsRequest::default();
    let request =
        conn.request::<_, ApiVersionsResponse>(ApiKey::DescribeTransactions, 0, &req, far);
    tokio::select! {
        _ = request => panic!("the broker never answers"),
        _ = tokio::time::sleep(Duration::from_millis(300)) => {}
    }
    assert_eq!(broker.requests().len(), 2, "the request was written");
    assert!(
        conn.is_closed(),
        "a connection that still owes an abandoned response must not be reused"
    );
}

#[tokio::test]
async fn a_request_queued_behind_an_abandoned_write_sends_nothing() {
    use crate::fake_broker::{FakeBroker, Reply};
    let broker = FakeBroker::start(|_| Reply::Default);
    let conn = Arc::new(plaintext_open(&broker.addr()).await.unwrap());
    // A write holds the writer; the next request checks that the
    // connection is open and waits for the writer behind it.
    let writing = conn.writer.lock().await;
    let queued = {
        let conn = Arc::clone(&conn);
        tokio::spawn(async move {
            let far = Instant::now() + Duration::from_secs(10);
            conn.request::<_, ApiVersionsResponse>(
                ApiKey::ApiVersions,
                3,
                &ApiVersionsRequest::default(),
                far,
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The write gives up half-way: the connection closes.
    conn.close("a request was abandoned in the middle of its write".into());
    drop(writing);
    let e = queued.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotConnected, "{e}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        broker.requests().len(),
        1,
        "only the handshake's ApiVersions reached the broker"
    );
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
        protocol: crate::security::Protocol::SaslPlaintext,
        tls: None,
        sasl: Some(SaslSettings::password(
            crate::security::Mechanism::Plain,
            "alice",
            password,
        )),
    }
}

#[tokio::test]
async fn a_sasl_session_lifetime_retires_the_connection_before_it_ends() {
    let (addr, broker) = sasl_broker(1000).await;
    let far = Instant::now() + Duration::from_secs(60);
    let requests = Arc::new(Sent::default());
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
        requests.all.load(Ordering::Relaxed),
        3,
        "ApiVersions, SaslHandshake, SaslAuthenticate"
    );
    assert_eq!(
        requests.describes.load(Ordering::Relaxed),
        0,
        "none of them a DescribeTransactions"
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

#[test]
fn a_server_of_another_protocol_is_named() {
    let http = i32::from_be_bytes(*b"HTTP");
    assert_eq!(http, 1213486160);
    let m = bad_frame(http);
    assert!(
        m.contains("HTTP server") && m.contains("another protocol"),
        "{m}"
    );
    let tls = i32::from_be_bytes([0x15, 0x03, 0x03, 0x00]);
    assert!(
        bad_frame(tls).contains("TLS listener"),
        "{}",
        bad_frame(tls)
    );
    let smtp = i32::from_be_bytes(*b"220 ");
    assert!(bad_frame(smtp).contains("\"220 \""), "{}", bad_frame(smtp));
    assert_eq!(bad_frame(-1), "bad response frame size -1");
}

/// A server that answers any request with an HTTP error, as a web server
/// on the bootstrap address would.
#[tokio::test]
async fn an_http_server_at_the_address_is_named() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf).await;
        let _ = s
            .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            .await;
        s
    });
    let e = match Connection::open(
        &addr,
        StrBytes::from_static_str("t"),
        Arc::default(),
        Instant::now() + Duration::from_secs(5),
        &Security::plaintext(),
    )
    .await
    {
        Ok(_) => panic!("an HTTP server passed for a broker"),
        Err(OpenError::Retry(e)) => e.to_string(),
        Err(OpenError::Fail(e)) => e.to_string(),
    };
    assert!(e.contains("HTTP server"), "{e}");
    drop(server.await);
}
