//! `OutRecord`: one record of a guarded write, and the conversion of a
//! write's arguments.

use krabka_coordination::transport::OutRecord;
use krabka_coordination_bindings::ArgError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use crate::convert::{headers, int_field, opt_bytes, str_field, type_name};
use crate::error::arg_error;

/// Python's `repr()` of a string.
pub fn py_repr(py: Python<'_>, s: &str) -> PyResult<String> {
    Ok(PyString::new(py, s).repr()?.to_string())
}

/// One record of a guarded write.
#[pyclass(module = "krabka_coordination", name = "OutRecord", frozen, eq)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyOutRecord(pub OutRecord);

impl PyOutRecord {
    /// The record of a write's arguments.
    pub fn convert(
        topic: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        key: Option<&Bound<'_, PyAny>>,
        partition: Option<&Bound<'_, PyAny>>,
        hdrs: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyOutRecord> {
        let partition = match partition {
            Some(p) if !p.is_none() => Some(int_field::<i32>(p, "partition")?),
            _ => None,
        };
        Ok(PyOutRecord(OutRecord {
            topic: str_field(topic, "topic")?,
            partition,
            key: opt_bytes(key, "key")?,
            value: opt_bytes(Some(value), "value")?,
            headers: headers(hdrs)?,
        }))
    }
}

/// The records of an iterable of `OutRecord`.
pub fn many_records(records: &Bound<'_, PyAny>) -> PyResult<Vec<OutRecord>> {
    let py = records.py();
    let iter = records.try_iter().map_err(|_| {
        arg_error(
            py,
            ArgError::wrong_type("records", "an iterable of OutRecord", &type_name(records)),
        )
    })?;
    let mut out = Vec::new();
    for item in iter {
        let item = item?;
        let rec = item.cast::<PyOutRecord>().map_err(|_| {
            arg_error(
                py,
                ArgError::wrong_type("a record", "an OutRecord", &type_name(&item)),
            )
        })?;
        out.push(rec.get().0.clone());
    }
    Ok(out)
}

#[pymethods]
impl PyOutRecord {
    /// A record for `topic`: `value` (bytes, or `None` for a tombstone), an
    /// optional `key`, an optional `partition` (else the producer's
    /// partitioner chooses) and `headers` (a dict or (name, bytes) pairs).
    #[new]
    #[pyo3(signature = (topic, value, key=None, partition=None, headers=None))]
    fn new(
        topic: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        key: Option<&Bound<'_, PyAny>>,
        partition: Option<&Bound<'_, PyAny>>,
        headers: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        PyOutRecord::convert(topic, value, key, partition, headers)
    }

    /// The topic.
    #[getter]
    fn topic(&self) -> &str {
        &self.0.topic
    }

    /// The value (`None`: a tombstone).
    #[getter]
    fn value(&self) -> Option<&[u8]> {
        self.0.value.as_deref()
    }

    /// The key.
    #[getter]
    fn key(&self) -> Option<&[u8]> {
        self.0.key.as_deref()
    }

    /// The partition, or `None` for the producer's partitioner.
    #[getter]
    fn partition(&self) -> Option<i32> {
        self.0.partition
    }

    /// The headers as (name, value) pairs.
    #[getter]
    fn headers(&self) -> Vec<(String, &[u8])> {
        self.0
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.as_slice()))
            .collect()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let bytes = |b: &Option<Vec<u8>>| -> PyResult<String> {
            match b {
                None => Ok("None".to_owned()),
                Some(b) => Ok(pyo3::types::PyBytes::new(py, b).repr()?.to_string()),
            }
        };
        Ok(format!(
            "OutRecord(topic={}, value={}, key={}, partition={}, headers={})",
            py_repr(py, &self.0.topic)?,
            bytes(&self.0.value)?,
            bytes(&self.0.key)?,
            self.0
                .partition
                .map_or_else(|| "None".to_owned(), |p| p.to_string()),
            PyList::new(py, self.headers())?.repr()?
        ))
    }
}
