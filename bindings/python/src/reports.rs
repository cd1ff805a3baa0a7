//! What the describe and topic operations return: `LeadershipStatus`,
//! `RosterEntry`, `RoleStateReport`, `TopicReport`.

use krabka_coordination as core;
use krabka_coordination::leadership::{LeadershipStatus, RoleStateReport};
use krabka_coordination::transport::kafka::TopicReport;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::records::py_repr;
use crate::values::{PyFencingToken, PyLease};

/// The authority of a role as its transaction coordinator reports it.
#[pyclass(module = "krabka_coordination", name = "LeadershipStatus", frozen, eq)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PyLeadershipStatus(pub LeadershipStatus);

#[pymethods]
impl PyLeadershipStatus {
    /// The newest token the coordinator minted for the role (`NO_EPOCH` when
    /// no member has taken it).
    #[getter]
    fn token(&self) -> PyFencingToken {
        PyFencingToken(self.0.token)
    }

    /// True when `token` is the role's current token: its holder is
    /// authoritative. `NO_EPOCH` never is. `token` is a `FencingToken` or
    /// its wire form (`"4001/7"`, as `FencingToken.parse` reads it).
    fn authoritative(&self, token: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.0.authoritative(&crate::values::token_of(token)?.0))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let token = Bound::new(py, PyFencingToken(self.0.token))?.repr()?;
        Ok(format!("LeadershipStatus(token={token})"))
    }
}

/// One member of a role's roster.
#[pyclass(module = "krabka_coordination", name = "RosterEntry", frozen, eq)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyRosterEntry {
    entry: core::RosterEntry,
    rank: usize,
}

impl PyRosterEntry {
    /// The entry of rank `rank` (its index in the roster).
    pub fn new(entry: core::RosterEntry, rank: usize) -> PyRosterEntry {
        PyRosterEntry { entry, rank }
    }
}

#[pymethods]
impl PyRosterEntry {
    /// The member id.
    #[getter]
    fn member(&self) -> &str {
        &self.entry.member
    }

    /// The member's place in the roster (0 first): the order of its
    /// registration.
    #[getter]
    fn rank(&self) -> usize {
        self.rank
    }

    /// The offset of the member's latest registration record.
    #[getter]
    fn offset(&self) -> i64 {
        self.entry.offset
    }

    /// When the member registered, in epoch milliseconds of its clock.
    #[getter]
    fn registered_at(&self) -> i64 {
        self.entry.registered_at
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "RosterEntry(member={}, rank={}, offset={}, registered_at={})",
            py_repr(py, &self.entry.member)?,
            self.rank,
            self.entry.offset,
            self.entry.registered_at
        ))
    }
}

/// The roster (in rank order) and the lease of a role.
#[pyclass(module = "krabka_coordination", name = "RoleStateReport", frozen)]
#[derive(Debug, Clone)]
pub struct PyRoleStateReport(pub RoleStateReport);

#[pymethods]
impl PyRoleStateReport {
    /// The role.
    #[getter]
    fn role(&self) -> &str {
        &self.0.role
    }

    /// The partition of `__coordination_state` that holds the role.
    #[getter]
    fn partition(&self) -> i32 {
        self.0.partition
    }

    /// The roster in rank order (`roster[i].rank == i`).
    #[getter]
    fn roster(&self) -> Vec<PyRosterEntry> {
        self.0
            .roster
            .iter()
            .enumerate()
            .map(|(rank, entry)| PyRosterEntry::new(entry.clone(), rank))
            .collect()
    }

    /// The current lease, or `None` (never taken, or cleared by a resign).
    #[getter]
    fn lease(&self) -> Option<PyLease> {
        self.0.lease.clone().map(PyLease)
    }

    /// The member ids in rank order.
    #[getter]
    fn members(&self) -> Vec<String> {
        self.0.roster.iter().map(|e| e.member.clone()).collect()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let lease = match &self.0.lease {
            Some(l) => Bound::new(py, PyLease(l.clone()))?.repr()?.to_string(),
            None => "None".to_owned(),
        };
        Ok(format!(
            "RoleStateReport(role={}, partition={}, members={}, lease={})",
            py_repr(py, &self.0.role)?,
            self.0.partition,
            PyList::new(py, self.members())?.repr()?,
            lease
        ))
    }
}

/// What `ensure_state_topic` or `check_state_topic` found or made.
#[pyclass(module = "krabka_coordination", name = "TopicReport", frozen)]
#[derive(Debug, Clone)]
pub struct PyTopicReport(pub TopicReport);

#[pymethods]
impl PyTopicReport {
    /// The topic's name.
    #[getter]
    fn topic(&self) -> &str {
        &self.0.topic
    }

    /// True when this call created the topic.
    #[getter]
    fn created(&self) -> bool {
        self.0.created
    }

    /// The partition count.
    #[getter]
    fn partitions(&self) -> i32 {
        self.0.partitions
    }

    /// The replica count of partition 0.
    #[getter]
    fn replication_factor(&self) -> i32 {
        self.0.replication_factor
    }

    /// The topic's `cleanup.policy` (`compact`).
    #[getter]
    fn cleanup_policy(&self) -> &str {
        &self.0.cleanup_policy
    }

    /// The topic's `min.insync.replicas`, when the broker reports it.
    #[getter]
    fn min_insync_replicas(&self) -> Option<i32> {
        self.0.min_insync_replicas
    }

    /// Advice for the operator (such as a `min.insync.replicas` below 2).
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.0.warnings.clone()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "TopicReport(topic={}, created={}, partitions={}, replication_factor={}, cleanup_policy={}, min_insync_replicas={}, warnings={})",
            py_repr(py, &self.0.topic)?,
            if self.0.created { "True" } else { "False" },
            self.0.partitions,
            self.0.replication_factor,
            py_repr(py, &self.0.cleanup_policy)?,
            self.0.min_insync_replicas.map_or_else(|| "None".to_owned(), |v| v.to_string()),
            PyList::new(py, &self.0.warnings)?.repr()?
        ))
    }
}
