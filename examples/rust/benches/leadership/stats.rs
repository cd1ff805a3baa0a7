//! Quantiles and their lines.

use std::time::Duration;

use serde_json::{json, Value};

/// `d` in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The value at quantile `q` (nearest rank) of `v`; NaN when empty.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

/// n, p50, p99, min and max of `v` as JSON.
pub fn stats(v: &[f64]) -> Value {
    json!({
        "n": v.len(),
        "p50": quantile(v, 0.5),
        "p99": quantile(v, 0.99),
        "max": quantile(v, 1.0),
        "min": quantile(v, 0.0),
    })
}

/// One line of the report.
pub fn stat_line(name: &str, v: &[f64]) -> String {
    format!(
        "  {name:<34} p50 {:>8.1} ms   p99 {:>8.1} ms   min {:>7.1}   max {:>8.1}   (n={})",
        quantile(v, 0.5),
        quantile(v, 0.99),
        quantile(v, 0.0),
        quantile(v, 1.0),
        v.len()
    )
}
