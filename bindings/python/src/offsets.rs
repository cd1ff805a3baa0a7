//! The input offsets of a guarded write: `InputOffset`, `ConsumedOffsets`
//! (what a leader commits with its output, in the same transaction) and
//! `CommittedOffset` (what a consumer group has committed), and the
//! conversion of a committed-offsets query's arguments.
//!
//! Each class wraps the core's own type and only converts Python values:
//! which offsets may be committed (a group id, topics, partitions and
//! offsets of 0 or more, each partition once) is the core's rule, checked
//! when the write or the query is called, as `InvalidArgumentError`.

use krabka_coordination::transport::{CommittedOffset, ConsumedOffsets, InputOffset};
use krabka_coordination_bindings::ArgError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert::{int_field, str_field, type_name};
use crate::error::arg_error;
use crate::records::py_repr;

/// `repr()` of an optional string.
fn opt_repr(py: Python<'_>, s: Option<&str>) -> PyResult<String> {
    s.map_or_else(|| Ok("None".to_owned()), |s| py_repr(py, s))
}

/// An optional `str` argument (`None` or left out: `None`).
fn opt_str(value: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<String>> {
    match value {
        Some(v) if !v.is_none() => str_field(v, field).map(Some),
        _ => Ok(None),
    }
}

/// An iterator over `value`, or a `TypeError` saying that `field` must be
/// `expected`.
fn iterate<'py>(
    value: &Bound<'py, PyAny>,
    field: &str,
    expected: &str,
) -> PyResult<Bound<'py, pyo3::types::PyIterator>> {
    value.try_iter().map_err(|_| {
        arg_error(
            value.py(),
            ArgError::wrong_type(field, expected, &type_name(value)),
        )
    })
}

/// One input partition's position: the offset of the next record to read
/// there (the last one processed, plus one), as a Kafka consumer commits.
#[pyclass(module = "krabka_coordination", name = "InputOffset", frozen, eq)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyInputOffset(pub InputOffset);

#[pymethods]
impl PyInputOffset {
    /// The position `offset` (the next record to read) of `topic` /
    /// `partition`, with optional `metadata` kept beside it. Only the types
    /// are checked here (a `TypeError`, or an `OverflowError` for an int
    /// beyond the field's width); the values are checked by the write that
    /// commits them.
    #[new]
    #[pyo3(signature = (topic, partition, offset, metadata=None))]
    fn new(
        topic: &Bound<'_, PyAny>,
        partition: &Bound<'_, PyAny>,
        offset: &Bound<'_, PyAny>,
        metadata: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Ok(PyInputOffset(InputOffset {
            topic: str_field(topic, "topic")?,
            partition: int_field::<i32>(partition, "partition")?,
            offset: int_field::<i64>(offset, "offset")?,
            metadata: opt_str(metadata, "metadata")?,
        }))
    }

    /// The topic read.
    #[getter]
    fn topic(&self) -> &str {
        &self.0.topic
    }

    /// Its partition.
    #[getter]
    fn partition(&self) -> i32 {
        self.0.partition
    }

    /// The offset of the next record to read.
    #[getter]
    fn offset(&self) -> i64 {
        self.0.offset
    }

    /// Kept with the offset and returned with it (at most the brokers'
    /// `offset.metadata.max.bytes`, or the commit is refused).
    #[getter]
    fn metadata(&self) -> Option<&str> {
        self.0.metadata.as_deref()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "InputOffset(topic={}, partition={}, offset={}, metadata={})",
            py_repr(py, &self.0.topic)?,
            self.0.partition,
            self.0.offset,
            opt_repr(py, self.0.metadata.as_deref())?
        ))
    }
}

/// The input a guarded write consumed: the offsets to commit for consumer
/// group `group` with the write's records, in its transaction. Records and
/// offsets commit together or not at all.
#[pyclass(module = "krabka_coordination", name = "ConsumedOffsets", frozen, eq)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyConsumedOffsets(pub ConsumedOffsets);

#[pymethods]
impl PyConsumedOffsets {
    /// The offsets `offsets` (an iterable of `InputOffset`, one per input
    /// partition) of consumer group `group`. The values are checked by the
    /// write that commits them (`InvalidArgumentError`).
    #[new]
    fn new(group: &Bound<'_, PyAny>, offsets: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = group.py();
        let group = str_field(group, "group")?;
        let mut list = Vec::new();
        for item in iterate(offsets, "offsets", "an iterable of InputOffset")? {
            let item = item?;
            let one = item.cast::<PyInputOffset>().map_err(|_| {
                arg_error(
                    py,
                    ArgError::wrong_type("an input offset", "an InputOffset", &type_name(&item)),
                )
            })?;
            list.push(one.get().0.clone());
        }
        Ok(PyConsumedOffsets(ConsumedOffsets::new(group, list)))
    }

    /// The consumer group whose offsets are committed.
    #[getter]
    fn group(&self) -> &str {
        &self.0.group
    }

    /// One entry per input partition.
    #[getter]
    fn offsets(&self) -> Vec<PyInputOffset> {
        self.0.offsets.iter().cloned().map(PyInputOffset).collect()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let offsets = PyList::new(py, self.offsets())?;
        Ok(format!(
            "ConsumedOffsets(group={}, offsets={})",
            py_repr(py, &self.0.group)?,
            offsets.repr()?
        ))
    }
}

/// What a consumer group has committed for one partition, as
/// `committed_offsets` returns it: only offsets of decided transactions
/// (read_committed).
#[pyclass(module = "krabka_coordination", name = "CommittedOffset", frozen, eq)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyCommittedOffset(pub CommittedOffset);

#[pymethods]
impl PyCommittedOffset {
    /// The topic.
    #[getter]
    fn topic(&self) -> &str {
        &self.0.topic
    }

    /// The partition.
    #[getter]
    fn partition(&self) -> i32 {
        self.0.partition
    }

    /// The offset of the next record to read; `None` when the group has
    /// committed nothing for the partition (start where your reset policy
    /// says).
    #[getter]
    fn offset(&self) -> Option<i64> {
        self.0.offset
    }

    /// The metadata committed with the offset.
    #[getter]
    fn metadata(&self) -> Option<&str> {
        self.0.metadata.as_deref()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "CommittedOffset(topic={}, partition={}, offset={}, metadata={})",
            py_repr(py, &self.0.topic)?,
            self.0.partition,
            self.0
                .offset
                .map_or_else(|| "None".to_owned(), |o| o.to_string()),
            opt_repr(py, self.0.metadata.as_deref())?
        ))
    }
}

/// The `offsets` argument of a write: a `ConsumedOffsets`, else a `TypeError`.
pub fn consumed_offsets(value: &Bound<'_, PyAny>) -> PyResult<ConsumedOffsets> {
    match value.cast::<PyConsumedOffsets>() {
        Ok(o) => Ok(o.get().0.clone()),
        Err(_) => Err(arg_error(
            value.py(),
            ArgError::wrong_type("offsets", "a ConsumedOffsets", &type_name(value)),
        )),
    }
}

/// The `partitions` argument of a committed-offsets query: a dict of topic
/// to partitions (an iterable of int), or an iterable of (topic,
/// partitions) pairs, in the order given.
pub fn query_partitions(value: &Bound<'_, PyAny>) -> PyResult<Vec<(String, Vec<i32>)>> {
    let py = value.py();
    const EXPECTED: &str =
        "a dict of topic to partitions or an iterable of (topic, partitions) pairs";
    let pairs = match value.cast::<PyDict>() {
        Ok(d) => d.items().into_any(),
        Err(_) => value.clone(),
    };
    let mut out = Vec::new();
    for item in iterate(&pairs, "partitions", EXPECTED)? {
        let item = item?;
        let pair: Option<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = item.extract().ok();
        let Some((topic, parts)) = pair else {
            return Err(arg_error(
                py,
                ArgError::wrong_type(
                    "a partitions entry",
                    "a (topic, partitions) pair",
                    &type_name(&item),
                ),
            ));
        };
        let topic = str_field(&topic, "topic")?;
        let mut list = Vec::new();
        for p in iterate(&parts, "the partitions of a topic", "an iterable of int")? {
            list.push(int_field::<i32>(&p?, "partition")?);
        }
        out.push((topic, list));
    }
    Ok(out)
}
