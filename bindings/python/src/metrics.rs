//! The core's metrics, read from Python: `metrics()` (every series as a
//! dict) and `metrics_text()` (the Prometheus text format).
//!
//! The module makes the shared recorder (`krabka_coordination_bindings::
//! metrics`) the extension's `metrics` recorder when it is imported, so
//! every member of the process counts from then on; these functions read
//! it. See the table of metrics in docs/metrics.md.

use krabka_coordination_bindings::metrics::{install_global, SampleValue};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// Makes the shared recorder this extension's recorder (at import).
pub fn install() {
    if install_global().is_none() {
        tracing::warn!("another metrics recorder was installed first: metrics() reads nothing");
    }
}

/// Every series the core has recorded in this process, ordered by name,
/// then labels: a list of dicts with `name` (`str`), `help` (`str`, the
/// metric's description), `labels` (a `dict` of `str`), `kind`
/// (`"counter"`, `"gauge"` or `"histogram"`), and `value` (an `int` for a
/// counter, a `float` for a gauge) or, for a histogram (a duration, in
/// seconds), `count` (`int`), `sum` (`float`) and `buckets` (a list of
/// `(upper bound in seconds, count at or below it)` pairs, the last one
/// `(math.inf, count)`).
#[pyfunction]
pub fn metrics(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let samples = install_global().map(|r| r.snapshot()).unwrap_or_default();
    let out = PyList::empty(py);
    for s in samples {
        let d = PyDict::new(py);
        d.set_item("name", &s.name)?;
        d.set_item("help", &s.help)?;
        let labels = PyDict::new(py);
        for (k, v) in &s.labels {
            labels.set_item(k, v)?;
        }
        d.set_item("labels", labels)?;
        match s.value {
            SampleValue::Counter(n) => {
                d.set_item("kind", "counter")?;
                d.set_item("value", n)?;
            }
            SampleValue::Gauge(v) => {
                d.set_item("kind", "gauge")?;
                d.set_item("value", v)?;
            }
            SampleValue::Histogram {
                count,
                sum,
                buckets,
            } => {
                d.set_item("kind", "histogram")?;
                d.set_item("count", count)?;
                d.set_item("sum", sum)?;
                d.set_item("buckets", buckets)?;
            }
        }
        out.append(d)?;
    }
    Ok(out)
}

/// The same series in the Prometheus text format (version 0.0.4), for a
/// `/metrics` endpoint of the application's own web server.
#[pyfunction]
pub fn metrics_text() -> String {
    install_global().map(|r| r.render()).unwrap_or_default()
}
