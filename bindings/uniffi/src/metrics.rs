//! The core's metrics (docs/metrics.md), read from Kotlin or Swift:
//! [`metrics`] (every series, structured) and [`metrics_text`] (the
//! Prometheus text format), the snapshot of the shared recorder
//! ([`krabka_coordination_bindings::metrics`]) that Python's `metrics()`
//! and the CLI's `/metrics` read too.
//!
//! The recorder is installed once per process, by the first [`Client`]
//! made (before it can record anything) or the first read.
//!
//! [`Client`]: crate::Client

use std::collections::HashMap;

use krabka_coordination_bindings::metrics::{install_global, Registry, SampleValue};

/// The kind of a series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum MetricKind {
    /// A count that only goes up.
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// Observed durations, in seconds: a count, a sum, buckets.
    Histogram,
}

/// A bucket of a histogram: the observations at or below `le` seconds
/// (cumulative, as Prometheus counts them).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MetricBucket {
    /// The bucket's upper bound, in seconds.
    pub le: f64,
    /// How many observations were at or below it (signed, as Java counts:
    /// saturating at `Long.MAX_VALUE`).
    pub count: i64,
}

/// One series of the core's metrics, now.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MetricSample {
    /// The metric, e.g. `krabka_elections_total`.
    pub name: String,
    /// What the metric counts (its `# HELP` text).
    pub help: String,
    /// The series' labels, e.g. `role` and `member`.
    pub labels: HashMap<String, String>,
    /// Counter, gauge or histogram.
    pub kind: MetricKind,
    /// A counter's count or a gauge's value; a histogram's sum.
    pub value: f64,
    /// A counter's count (exact); a histogram's number of observations
    /// (its `+Inf` bucket); 0 for a gauge. Signed, as Java counts
    /// (saturating at `Long.MAX_VALUE`).
    pub count: i64,
    /// A histogram's buckets, cumulative, in order of their bounds, the
    /// last with `le` infinite (its count is `count`); empty for a counter
    /// or a gauge.
    pub buckets: Vec<MetricBucket>,
}

/// A count as a signed 64-bit number (saturating): Java has no unsigned
/// types, and Kotlin's `ULong` reaches Java under a mangled name.
fn saturating_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The shared recorder, installed by the first call; `None` when another
/// recorder of this library's copy of the `metrics` crate came first.
pub(crate) fn registry() -> Option<&'static Registry> {
    static WARNED: std::sync::Once = std::sync::Once::new();
    let r = install_global();
    if r.is_none() {
        WARNED.call_once(|| {
            tracing::warn!("another metrics recorder was installed first: metrics() reads nothing");
        });
    }
    r
}

/// Every series the core has recorded in this process, ordered by name,
/// then labels (see docs/metrics.md for the table of metrics).
#[uniffi::export]
pub fn metrics() -> Vec<MetricSample> {
    let samples = registry().map(Registry::snapshot).unwrap_or_default();
    samples
        .into_iter()
        .map(|s| {
            let labels = s.labels.into_iter().collect();
            let (kind, value, count, buckets) = match s.value {
                SampleValue::Counter(n) => (MetricKind::Counter, n as f64, n, Vec::new()),
                SampleValue::Gauge(v) => (MetricKind::Gauge, v, 0, Vec::new()),
                SampleValue::Histogram {
                    count,
                    sum,
                    buckets,
                } => (
                    MetricKind::Histogram,
                    sum,
                    count,
                    buckets
                        .into_iter()
                        .map(|(le, count)| MetricBucket {
                            le,
                            count: saturating_i64(count),
                        })
                        .collect(),
                ),
            };
            MetricSample {
                name: s.name,
                help: s.help,
                labels,
                kind,
                value,
                count: saturating_i64(count),
                buckets,
            }
        })
        .collect()
}

/// The same series in the Prometheus text format (version 0.0.4), for a
/// `/metrics` endpoint of the application's own web server.
#[uniffi::export]
pub fn metrics_text() -> String {
    registry().map(Registry::render).unwrap_or_default()
}
