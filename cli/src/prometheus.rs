//! The small HTTP server of `krabka run --metrics-addr`: serves the
//! shared recorder's Prometheus text (`krabka_coordination_bindings::metrics`)
//! on `GET /metrics`.

use krabka_coordination_bindings::metrics::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Serves `registry` on `GET /metrics` at `listener` until the process ends.
pub async fn serve(listener: TcpListener, registry: Registry) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let registry = registry.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            let n = match tokio::time::timeout(
                std::time::Duration::from_secs(5),
                stream.read(&mut buf),
            )
            .await
            {
                Ok(Ok(n)) => n,
                _ => return,
            };
            let request = String::from_utf8_lossy(&buf[..n]);
            let path = request.split_whitespace().nth(1).unwrap_or("");
            let (status, body) = if request.starts_with("GET ") && path == "/metrics" {
                ("200 OK", registry.render())
            } else {
                ("404 Not Found", "only GET /metrics is served\n".to_owned())
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}
