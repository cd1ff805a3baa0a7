//! A `metrics` recorder that keeps every series in memory and renders the
//! Prometheus text format (version 0.0.4), and the small HTTP server of
//! `krabka run --metrics-addr` that serves it on `GET /metrics`.
//!
//! Counters and gauges are plain values; a histogram is rendered as a
//! summary without quantiles (`_count` and `_sum`), which is what a
//! dashboard's rate and mean need without choosing buckets for it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One series' value.
#[derive(Debug, Default)]
struct Value {
    /// A counter's count, or a gauge's f64 bits.
    bits: AtomicU64,
    /// A histogram's (count, sum).
    summary: Mutex<(u64, f64)>,
}

impl CounterFn for Value {
    fn increment(&self, n: u64) {
        self.bits.fetch_add(n, Ordering::Relaxed);
    }
    fn absolute(&self, n: u64) {
        self.bits.fetch_max(n, Ordering::Relaxed);
    }
}

impl GaugeFn for Value {
    fn increment(&self, d: f64) {
        let _ = self
            .bits
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some((f64::from_bits(b) + d).to_bits())
            });
    }
    fn decrement(&self, d: f64) {
        GaugeFn::increment(self, -d);
    }
    fn set(&self, v: f64) {
        self.bits.store(v.to_bits(), Ordering::Relaxed);
    }
}

impl HistogramFn for Value {
    fn record(&self, v: f64) {
        let mut s = self.summary.lock().unwrap_or_else(|e| e.into_inner());
        s.0 += 1;
        s.1 += v;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Counter,
    Gauge,
    Summary,
}

/// A series: its name and its labels in order.
type SeriesKey = (String, Vec<(String, String)>);

/// Every series, with its kind and value.
type Series = BTreeMap<SeriesKey, (Kind, Arc<Value>)>;

/// The recorder: every series by (name, labels).
#[derive(Debug, Default, Clone)]
pub struct Registry {
    series: Arc<Mutex<Series>>,
    help: Arc<Mutex<BTreeMap<String, String>>>,
}

impl Registry {
    fn series(&self, key: &Key, kind: Kind) -> Arc<Value> {
        let labels = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        let mut all = self.series.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(
            &all.entry((key.name().to_owned(), labels))
                .or_insert_with(|| (kind, Arc::default()))
                .1,
        )
    }

    /// Every series in the Prometheus text format.
    pub fn render(&self) -> String {
        let all = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let help = self.help.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        let mut last_name = "";
        for ((name, labels), (kind, value)) in all.iter() {
            if name != last_name {
                if let Some(h) = help.get(name) {
                    let _ = writeln!(out, "# HELP {name} {h}");
                }
                let t = match kind {
                    Kind::Counter => "counter",
                    Kind::Gauge => "gauge",
                    Kind::Summary => "summary",
                };
                let _ = writeln!(out, "# TYPE {name} {t}");
                last_name = name;
            }
            let l = render_labels(labels);
            match kind {
                Kind::Counter => {
                    let _ = writeln!(out, "{name}{l} {}", value.bits.load(Ordering::Relaxed));
                }
                Kind::Gauge => {
                    let v = f64::from_bits(value.bits.load(Ordering::Relaxed));
                    let _ = writeln!(out, "{name}{l} {v}");
                }
                Kind::Summary => {
                    let (count, sum) = *value.summary.lock().unwrap_or_else(|e| e.into_inner());
                    let _ = writeln!(out, "{name}_count{l} {count}");
                    let _ = writeln!(out, "{name}_sum{l} {sum}");
                }
            }
        }
        out
    }
}

/// `{k="v",...}` with Prometheus escaping, or nothing.
fn render_labels(labels: &[(String, String)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| {
            let v = v
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!("{k}=\"{v}\"")
        })
        .collect();
    format!("{{{}}}", parts.join(","))
}

impl Recorder for Registry {
    fn describe_counter(&self, key: KeyName, _: Option<Unit>, d: SharedString) {
        self.help
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.as_str().to_owned(), d.to_string());
    }
    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, d: SharedString) {
        self.describe_counter(key, unit, d);
    }
    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, d: SharedString) {
        self.describe_counter(key, unit, d);
    }
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.series(key, Kind::Counter))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.series(key, Kind::Gauge))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.series(key, Kind::Summary))
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_gauges_and_summaries_with_escaped_labels() {
        let r = Registry::default();
        metrics::with_local_recorder(&r, || {
            metrics::counter!("c_total", "role" => "a\"b").increment(2);
            metrics::counter!("c_total", "role" => "x").increment(1);
            metrics::gauge!("g", "role" => "x").set(1.5);
            metrics::histogram!("h_seconds").record(0.25);
            metrics::histogram!("h_seconds").record(0.5);
        });
        let text = r.render();
        assert!(text.contains("# TYPE c_total counter\n"), "{text}");
        assert!(text.contains("c_total{role=\"a\\\"b\"} 2\n"), "{text}");
        assert!(text.contains("c_total{role=\"x\"} 1\n"), "{text}");
        assert!(text.contains("g{role=\"x\"} 1.5\n"), "{text}");
        assert!(
            text.contains("h_seconds_count 2\nh_seconds_sum 0.75\n"),
            "{text}"
        );
        assert_eq!(text.matches("# TYPE c_total").count(), 1);
    }
}
