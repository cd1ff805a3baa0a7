//! The small HTTP server of `krabka run --metrics-addr`: the shared
//! recorder's Prometheus text (`krabka_coordination_bindings::metrics`) on
//! `GET /metrics`, and the probes Kubernetes expects: `GET /healthz` (200
//! while the process runs) and `GET /readyz` (200 only while this member
//! leads the role, 503 otherwise).

use std::sync::{Arc, Mutex};

use krabka_coordination::leadership::Leadership;
use krabka_coordination_bindings::metrics::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Whether this member leads: the term `krabka run` runs its child in, if
/// any. Ready means that term is held ([`Leadership::is_held`], which turns
/// false at the local lease deadline even before anything else noticed).
#[derive(Default, Clone)]
pub struct Readiness(Arc<Mutex<Option<Arc<Leadership>>>>);

impl Readiness {
    /// The member leads in `term` (from the child's start).
    pub fn leading(&self, term: &Arc<Leadership>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(term));
    }

    /// The member no longer leads (the term is ending or over).
    pub fn not_leading(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// True while the term the child runs in is held.
    pub fn ready(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|l| l.is_held())
    }
}

/// The answer to one request line: status and body.
fn answer(request: &str, registry: &Registry, readiness: &Readiness) -> (&'static str, String) {
    let mut words = request.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    if method != "GET" {
        return ("405 Method Not Allowed", "only GET is served\n".to_owned());
    }
    match path {
        "/metrics" => ("200 OK", registry.render()),
        "/healthz" => ("200 OK", "ok\n".to_owned()),
        "/readyz" if readiness.ready() => ("200 OK", "leading\n".to_owned()),
        "/readyz" => ("503 Service Unavailable", "not leading\n".to_owned()),
        _ => (
            "404 Not Found",
            "GET /metrics, /healthz or /readyz\n".to_owned(),
        ),
    }
}

/// Serves `registry` and the probes at `listener` until the process ends.
pub async fn serve(listener: TcpListener, registry: Registry, readiness: Readiness) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let (registry, readiness) = (registry.clone(), readiness.clone());
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
            let (status, body) = answer(&request, &registry, &readiness);
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probes_and_the_metrics_answer_by_path_and_method() {
        let (r, ready) = (Registry::default(), Readiness::default());
        let status = |req: &str| answer(req, &r, &ready).0;
        assert_eq!(status("GET /metrics HTTP/1.1\r\n"), "200 OK");
        assert_eq!(status("GET /healthz HTTP/1.1\r\n"), "200 OK");
        assert_eq!(
            status("GET /readyz HTTP/1.1\r\n"),
            "503 Service Unavailable"
        );
        assert_eq!(status("GET /other HTTP/1.1\r\n"), "404 Not Found");
        assert_eq!(
            status("POST /readyz HTTP/1.1\r\n"),
            "405 Method Not Allowed"
        );
        assert_eq!(status(""), "405 Method Not Allowed");
        ready.not_leading();
        assert!(!ready.ready());
    }
}
