//! A `metrics` recorder that keeps every series of the core's metrics
//! (`krabka_coordination::metrics`) in memory, for a binding or a tool to
//! read: [`Registry::snapshot`] (each series' current value) and
//! [`Registry::render`] (the Prometheus text format, version 0.0.4). The
//! `krabka` CLI serves the text on `GET /metrics`; the Python package reads
//! the snapshot (`krabka_coordination.metrics()`).
//!
//! Counters and gauges are plain values; a histogram (every one of the
//! core's is a duration in seconds) keeps its count, its sum and a count per
//! bucket of [`BUCKETS`], rendered as a Prometheus histogram (`_bucket` with
//! `le`, `_sum`, `_count`), so a p99 can be computed with
//! `histogram_quantile`.
//!
//! Not `metrics-exporter-prometheus`: the bindings read a structured
//! snapshot ([`Registry::snapshot`]: Python's `metrics()`), which that
//! exporter does not give (it renders text), and each binding's copy of the
//! `metrics` crate needs a recorder of its own.
//!
//! [`install_global`] makes one registry the process's recorder; the
//! `metrics` facade allows one per process (per copy of the `metrics`
//! crate: each extension module or library carries its own).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::per_process::PerProcess;

use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};

/// The upper bounds of a histogram's buckets, in seconds: from 1 ms (a
/// renewal on loopback) to a minute (an acquire that waited out a lease).
/// Prometheus's `+Inf` bucket is the count.
pub const BUCKETS: [f64; 15] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// A histogram's observations.
#[derive(Debug, Default, Clone, Copy)]
struct Observed {
    count: u64,
    sum: f64,
    /// Observations per bucket of [`BUCKETS`] (not cumulative): the first
    /// bucket whose bound is at least the value.
    buckets: [u64; BUCKETS.len()],
}

/// One series' value.
#[derive(Debug, Default)]
struct Value {
    /// A counter's count, or a gauge's f64 bits.
    bits: AtomicU64,
    /// A histogram's observations.
    observed: Mutex<Observed>,
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
        let mut o = self.observed.lock().unwrap_or_else(|e| e.into_inner());
        o.count += 1;
        o.sum += v;
        // NaN and values over the last bound are in +Inf only.
        if let Some(i) = BUCKETS.iter().position(|&le| v <= le) {
            o.buckets[i] += 1;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// A series: its name and its labels in order.
type SeriesKey = (String, Vec<(String, String)>);

/// Every series, with its kind and value.
type Series = BTreeMap<SeriesKey, (Kind, Arc<Value>)>;

/// The recorder: every series by (name, labels), and each metric's help
/// text (the core's, [`krabka_coordination::metrics::ALL`], from the start;
/// any other metric's once described).
///
/// Per process: a forked child starts from an empty registry of its own
/// (its numbers are its own, as a new process's are) and never touches the
/// parent's, whose locks another thread of the parent may have held at the
/// instant of the fork ([`PerProcess`]).
#[derive(Clone, Default)]
pub struct Registry {
    state: Arc<PerProcess<State>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

/// A registry's series and help texts, in one process.
struct State {
    series: Mutex<Series>,
    help: Mutex<BTreeMap<String, String>>,
}

impl Default for State {
    fn default() -> Self {
        let help = krabka_coordination::metrics::ALL
            .iter()
            .map(|m| (m.name.to_owned(), m.help.to_owned()))
            .collect();
        State {
            series: Mutex::default(),
            help: Mutex::new(help),
        }
    }
}

impl Registry {
    /// This process's state (a new one in a forked child).
    fn state(&self) -> &State {
        self.state.get_or_init(State::default)
    }

    /// Holds this process's series lock until the guard drops: for tests
    /// that fork while it is held. Nothing else should call it.
    #[doc(hidden)]
    pub fn hold_series_lock_for_tests(&self) -> impl Drop + '_ {
        self.state()
            .series
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The help text of metric `name`: its description, or empty when
    /// nothing described it.
    pub fn help(&self, name: &str) -> String {
        self.state()
            .help
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
            .unwrap_or_default()
    }

    fn series(&self, key: &Key, kind: Kind) -> Arc<Value> {
        let labels = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        let mut all = self
            .state()
            .series
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        Arc::clone(
            &all.entry((key.name().to_owned(), labels))
                .or_insert_with(|| (kind, Arc::default()))
                .1,
        )
    }

    /// Every series in the Prometheus text format: each metric with its
    /// `# HELP` (empty for a metric nothing described) and `# TYPE` lines,
    /// each histogram with its `+Inf` bucket.
    pub fn render(&self) -> String {
        let all = self
            .state()
            .series
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let help = self.state().help.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        let mut last_name = "";
        for ((name, labels), (kind, value)) in all.iter() {
            if name != last_name {
                let h = help.get(name).map_or("", String::as_str);
                let h = h.replace('\\', "\\\\").replace('\n', "\\n");
                let _ = writeln!(out, "# HELP {name} {h}");
                let t = match kind {
                    Kind::Counter => "counter",
                    Kind::Gauge => "gauge",
                    Kind::Histogram => "histogram",
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
                Kind::Histogram => {
                    let o = *value.observed.lock().unwrap_or_else(|e| e.into_inner());
                    let mut below = 0;
                    for (le, n) in BUCKETS.iter().zip(o.buckets) {
                        below += n;
                        let l = render_labels_le(labels, &le.to_string());
                        let _ = writeln!(out, "{name}_bucket{l} {below}");
                    }
                    let inf = render_labels_le(labels, "+Inf");
                    let _ = writeln!(out, "{name}_bucket{inf} {}", o.count);
                    let _ = writeln!(out, "{name}_sum{l} {}", o.sum);
                    let _ = writeln!(out, "{name}_count{l} {}", o.count);
                }
            }
        }
        out
    }
}

/// A bucket's labels: the series' labels and `le`.
fn render_labels_le(labels: &[(String, String)], le: &str) -> String {
    let mut all = labels.to_vec();
    all.push(("le".to_owned(), le.to_owned()));
    render_labels(&all)
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
        self.state()
            .help
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
        Histogram::from_arc(self.series(key, Kind::Histogram))
    }
}

/// The value of one series in a [`Registry::snapshot`].
#[derive(Debug, Clone, PartialEq)]
pub enum SampleValue {
    /// A counter's count.
    Counter(u64),
    /// A gauge's value.
    Gauge(f64),
    /// A histogram's number of observations, their sum, and the cumulative
    /// count of each bucket of [`BUCKETS`] and of `+Inf`.
    Histogram {
        /// How many values were recorded (the `+Inf` bucket).
        count: u64,
        /// Their sum.
        sum: f64,
        /// `(upper bound, values at or below it)` for each of [`BUCKETS`],
        /// then `(f64::INFINITY, count)`.
        buckets: Vec<(f64, u64)>,
    },
}

/// One series: its name, help text, labels (in the order recorded) and
/// value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric's name, e.g. `krabka_elections_total`.
    pub name: String,
    /// The metric's help text (the `# HELP` line's), empty when nothing
    /// described it.
    pub help: String,
    /// The series' labels, e.g. `[("role", "orders"), ("member", "a")]`.
    pub labels: Vec<(String, String)>,
    /// Its value now.
    pub value: SampleValue,
}

impl Registry {
    /// Every series' current value, ordered by name, then labels.
    pub fn snapshot(&self) -> Vec<Sample> {
        let all = self
            .state()
            .series
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let help = self.state().help.lock().unwrap_or_else(|e| e.into_inner());
        all.iter()
            .map(|((name, labels), (kind, value))| Sample {
                name: name.clone(),
                help: help.get(name).cloned().unwrap_or_default(),
                labels: labels.clone(),
                value: match kind {
                    Kind::Counter => SampleValue::Counter(value.bits.load(Ordering::Relaxed)),
                    Kind::Gauge => {
                        SampleValue::Gauge(f64::from_bits(value.bits.load(Ordering::Relaxed)))
                    }
                    Kind::Histogram => {
                        let o = *value.observed.lock().unwrap_or_else(|e| e.into_inner());
                        let mut below = 0;
                        let buckets = BUCKETS
                            .iter()
                            .zip(o.buckets)
                            .map(|(&le, n)| {
                                below += n;
                                (le, below)
                            })
                            .chain([(f64::INFINITY, o.count)])
                            .collect();
                        SampleValue::Histogram {
                            count: o.count,
                            sum: o.sum,
                            buckets,
                        }
                    }
                },
            })
            .collect()
    }
}

/// The registry installed as this process's `metrics` recorder, installed
/// by the first call. `None` when another recorder was installed first
/// (by other code in the same copy of the `metrics` crate): the core's
/// numbers then go to that one.
pub fn install_global() -> Option<&'static Registry> {
    static GLOBAL: OnceLock<Option<Registry>> = OnceLock::new();
    GLOBAL
        .get_or_init(|| {
            let registry = Registry::default();
            metrics::set_global_recorder(registry.clone())
                .ok()
                .map(|()| registry)
        })
        .as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_gauges_and_histograms_with_escaped_labels() {
        let r = Registry::default();
        metrics::with_local_recorder(&r, || {
            metrics::counter!("c_total", "role" => "a\"b").increment(2);
            metrics::counter!("c_total", "role" => "x").increment(1);
            metrics::gauge!("g", "role" => "x").set(1.5);
            metrics::histogram!("h_seconds").record(0.25);
            metrics::histogram!("h_seconds").record(0.5);
        });
        let text = r.render();
        // An undescribed metric's help is empty; a core metric's is its
        // description from the start.
        assert!(
            text.contains("# HELP c_total \n# TYPE c_total counter\n"),
            "{text}"
        );
        assert!(text.contains("c_total{role=\"a\\\"b\"} 2\n"), "{text}");
        assert!(text.contains("c_total{role=\"x\"} 1\n"), "{text}");
        assert!(text.contains("g{role=\"x\"} 1.5\n"), "{text}");
        assert!(text.contains("# TYPE h_seconds histogram\n"), "{text}");
        assert!(text.contains("h_seconds_bucket{le=\"0.1\"} 0\n"), "{text}");
        assert!(text.contains("h_seconds_bucket{le=\"0.25\"} 1\n"), "{text}");
        assert!(text.contains("h_seconds_bucket{le=\"0.5\"} 2\n"), "{text}");
        assert!(text.contains("h_seconds_bucket{le=\"60\"} 2\n"), "{text}");
        assert!(
            text.contains(
                "h_seconds_bucket{le=\"+Inf\"} 2\nh_seconds_sum 0.75\nh_seconds_count 2\n"
            ),
            "{text}"
        );
        assert_eq!(text.matches("# TYPE c_total").count(), 1);
        assert_eq!(text.matches("# HELP ").count(), 3, "{text}");
    }

    #[test]
    fn every_metric_has_its_help_line_before_its_type_line() {
        let r = Registry::default();
        metrics::with_local_recorder(&r, || {
            metrics::counter!(krabka_coordination::metrics::FENCES, "role" => "x").increment(0);
            metrics::describe_gauge!("g", "a gauge\nof two lines");
            metrics::gauge!("g").set(1.0);
        });
        let text = r.render();
        assert!(
            text.starts_with(
                "# HELP g a gauge\\nof two lines\n# TYPE g gauge\ng 1\n\
                 # HELP krabka_fences_total Terms ended by a newer epoch.\n\
                 # TYPE krabka_fences_total counter\n\
                 krabka_fences_total{role=\"x\"} 0\n"
            ),
            "{text}"
        );
        assert_eq!(r.snapshot()[1].help, "Terms ended by a newer epoch.");
        assert_eq!(r.help("g"), "a gauge\nof two lines");
    }

    #[test]
    fn a_snapshot_has_every_series_with_its_kind_and_value() {
        let r = Registry::default();
        metrics::with_local_recorder(&r, || {
            metrics::counter!("c_total", "role" => "x", "member" => "m").increment(3);
            metrics::gauge!("g").set(-2.5);
            metrics::histogram!("h_seconds").record(0.25);
            metrics::histogram!("h_seconds").record(1.0);
            // Past the last bound: in +Inf (the count) only.
            metrics::histogram!("h_seconds").record(90.0);
        });
        let labels = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(
            r.snapshot(),
            vec![
                Sample {
                    name: "c_total".into(),
                    help: String::new(),
                    labels: labels(&[("role", "x"), ("member", "m")]),
                    value: SampleValue::Counter(3),
                },
                Sample {
                    name: "g".into(),
                    help: String::new(),
                    labels: vec![],
                    value: SampleValue::Gauge(-2.5),
                },
                Sample {
                    name: "h_seconds".into(),
                    help: String::new(),
                    labels: vec![],
                    value: SampleValue::Histogram {
                        count: 3,
                        sum: 91.25,
                        buckets: BUCKETS
                            .iter()
                            .map(|&le| (le, u64::from(le >= 0.25) + u64::from(le >= 1.0)))
                            .chain([(f64::INFINITY, 3)])
                            .collect(),
                    },
                },
            ]
        );
    }
}
