//! The core's metrics, read from JavaScript: `metrics()` (every series as
//! an object) and `metricsText()` (the Prometheus text format).
//!
//! The shared recorder (`krabka_coordination_bindings::metrics`) is made
//! this addon's `metrics` recorder when the package loads
//! (`_installMetrics`), so every member of the process counts from then on;
//! these functions read it. The metrics are the core's (docs/metrics.md);
//! nothing here computes one.

use krabka_coordination_bindings::metrics::{install_global, SampleValue};
use napi::bindgen_prelude::{Array, Object};
use napi::Env;
use napi_derive::napi;

/// Makes the shared recorder this addon's recorder (when the package
/// loads; idempotent).
#[napi(js_name = "_installMetrics", skip_typescript)]
pub fn install_metrics() {
    if install_global().is_none() {
        tracing::warn!("another metrics recorder was installed first: metrics() reads nothing");
    }
}

/// Every series the core has recorded in this process (see the header's
/// `MetricSample`).
#[napi(skip_typescript)]
pub fn metrics(env: &Env) -> napi::Result<Array<'_>> {
    let samples = install_global().map(|r| r.snapshot()).unwrap_or_default();
    let mut out = env.create_array(samples.len() as u32)?;
    for (i, s) in samples.into_iter().enumerate() {
        let mut o = Object::new(env)?;
        o.set("name", &s.name)?;
        o.set("help", &s.help)?;
        let mut labels = Object::new(env)?;
        for (k, v) in &s.labels {
            labels.set(k, v)?;
        }
        o.set("labels", labels)?;
        match s.value {
            SampleValue::Counter(n) => {
                o.set("kind", "counter")?;
                // Exact up to 2^53, which no count of elections reaches.
                o.set("value", n as f64)?;
            }
            SampleValue::Gauge(v) => {
                o.set("kind", "gauge")?;
                o.set("value", v)?;
            }
            SampleValue::Histogram {
                count,
                sum,
                buckets,
            } => {
                o.set("kind", "histogram")?;
                o.set("count", count as f64)?;
                o.set("sum", sum)?;
                // The last pair is `[Infinity, count]`.
                let pairs: Vec<Vec<f64>> = buckets
                    .into_iter()
                    .map(|(le, n)| vec![le, n as f64])
                    .collect();
                o.set("buckets", pairs)?;
            }
        }
        out.set(i as u32, o)?;
    }
    Ok(out)
}

/// Every metric the core records (`krabka_coordination::metrics::ALL`), as
/// `{ name, kind, help, labels }` objects in order of name: what the
/// package's `registerMetrics` registers with a `prom-client` registry
/// before any series exists.
#[napi(js_name = "_metricInfo", skip_typescript)]
pub fn metric_info(env: &Env) -> napi::Result<Array<'_>> {
    use krabka_coordination::metrics::{MetricKind, ALL};
    let mut out = env.create_array(ALL.len() as u32)?;
    for (i, m) in ALL.iter().enumerate() {
        let mut o = Object::new(env)?;
        o.set("name", m.name)?;
        let kind = match m.kind {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
        };
        o.set("kind", kind)?;
        o.set("help", m.help)?;
        o.set("labels", m.labels.to_vec())?;
        out.set(i as u32, o)?;
    }
    Ok(out)
}

/// The same series in the Prometheus text format (version 0.0.4).
#[napi(js_name = "metricsText", skip_typescript)]
pub fn metrics_text() -> String {
    install_global().map(|r| r.render()).unwrap_or_default()
}
