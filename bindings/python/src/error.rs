//! The one place where errors become Python exceptions.
//!
//! # The hierarchy
//!
//! ```text
//! KrabkaError(Exception)                 base of everything this package raises
//! ├── FormatError(KrabkaError, ValueError)          FORMAT; .part
//! ├── EncodeError(KrabkaError, ValueError)          ENCODE; .part, .field
//! ├── InvalidArgumentError(KrabkaError, ValueError) INVALID_ARGUMENT
//! ├── Fenced(KrabkaError)                           FENCED
//! ├── TransientError(KrabkaError)                   TRANSIENT
//! ├── FatalError(KrabkaError)                       FATAL
//! ├── Resigned(KrabkaError)                         RESIGNED
//! ├── Cancelled(KrabkaError)                        CANCELLED
//! ├── LeaseExpired(KrabkaError)                     LEASE_EXPIRED
//! └── OutcomeUnknown(KrabkaError)                   OUTCOME_UNKNOWN
//! ```
//!
//! Each class but the base stands for one core `ErrorKind`: its docstring is
//! the kind's description in the shared table
//! (`krabka_coordination_bindings::errors::KINDS`) and its class attribute
//! `kind` the kind's stable name. The classes are made once per interpreter
//! (with `type(name, bases, ns)`, because three of them have two bases).
//!
//! # Mapping
//!
//! [`error_to_py`] chooses the class by `Error::kind()`, never by message
//! text; a kind this binding does not know yet becomes the base class. The
//! part and field of a format or encode error become attributes. The Rust
//! `source()` chain becomes the `__cause__` chain: a link that is itself a
//! Python exception is attached as it is (type and traceback survive the
//! trip through the core), a link that is a core error is mapped by its own
//! kind, a token provider's error (the core's `TokenProviderError`) is
//! replaced by what the provider raised or returned, and any other link
//! becomes a `KrabkaError` carrying its message.
//!
//! Argument refusals of the shared crate ([`arg_error`]) map by their
//! `ArgErrorKind`: `TypeError`, `InvalidArgumentError`, `OverflowError`.

use std::error::Error as StdError;

use krabka_coordination::transport::kafka::TokenProviderError;
use krabka_coordination::{
    EncodeError as CoreEncodeError, Error, ErrorKind, FormatError as CoreFormatError, SharedError,
};
use krabka_coordination_bindings::errors::{self, details, message, Caller};
use krabka_coordination_bindings::{ArgError, ArgErrorKind};
use pyo3::exceptions::{PyException, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};

/// The module name the exception classes report (`__module__`): the public
/// package, not the private native module.
const PUBLIC_MODULE: &str = "krabka_coordination";

/// One exception class of the package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exc {
    /// `KrabkaError(Exception)`: the base class.
    Krabka,
    /// `FormatError(KrabkaError, ValueError)`.
    Format,
    /// `EncodeError(KrabkaError, ValueError)`.
    Encode,
    /// `InvalidArgumentError(KrabkaError, ValueError)`.
    InvalidArgument,
    /// `Fenced(KrabkaError)`.
    Fenced,
    /// `TransientError(KrabkaError)`.
    Transient,
    /// `FatalError(KrabkaError)`.
    Fatal,
    /// `Resigned(KrabkaError)`.
    Resigned,
    /// `Cancelled(KrabkaError)`.
    Cancelled,
    /// `LeaseExpired(KrabkaError)`.
    LeaseExpired,
    /// `OutcomeUnknown(KrabkaError)`.
    OutcomeUnknown,
}

impl Exc {
    /// Every class, base first (the order they are created in).
    pub const ALL: [Exc; 11] = [
        Exc::Krabka,
        Exc::Format,
        Exc::Encode,
        Exc::InvalidArgument,
        Exc::Fenced,
        Exc::Transient,
        Exc::Fatal,
        Exc::Resigned,
        Exc::Cancelled,
        Exc::LeaseExpired,
        Exc::OutcomeUnknown,
    ];

    /// The class of a core error kind (the base for a kind newer than this
    /// binding).
    pub fn of_kind(kind: ErrorKind) -> Exc {
        match kind {
            ErrorKind::Format => Exc::Format,
            ErrorKind::Encode => Exc::Encode,
            ErrorKind::InvalidArgument => Exc::InvalidArgument,
            ErrorKind::Fenced => Exc::Fenced,
            ErrorKind::Transient => Exc::Transient,
            ErrorKind::Fatal => Exc::Fatal,
            ErrorKind::Resigned => Exc::Resigned,
            ErrorKind::Cancelled => Exc::Cancelled,
            ErrorKind::LeaseExpired => Exc::LeaseExpired,
            ErrorKind::OutcomeUnknown => Exc::OutcomeUnknown,
            _ => Exc::Krabka,
        }
    }

    /// The core kind this class stands for (`None` for the base).
    pub fn kind(self) -> Option<ErrorKind> {
        if self == Exc::Krabka {
            return None;
        }
        ErrorKind::ALL
            .into_iter()
            .find(|k| Exc::of_kind(*k) == self)
    }

    /// The class name in Python.
    pub fn name(self) -> &'static str {
        match self {
            Exc::Krabka => "KrabkaError",
            Exc::Format => "FormatError",
            Exc::Encode => "EncodeError",
            Exc::InvalidArgument => "InvalidArgumentError",
            Exc::Fenced => "Fenced",
            Exc::Transient => "TransientError",
            Exc::Fatal => "FatalError",
            Exc::Resigned => "Resigned",
            Exc::Cancelled => "Cancelled",
            Exc::LeaseExpired => "LeaseExpired",
            Exc::OutcomeUnknown => "OutcomeUnknown",
        }
    }

    fn doc(self) -> &'static str {
        match self.kind().and_then(errors::info) {
            Some(info) => info.description,
            None => {
                "Base class of every exception krabka_coordination raises. `kind` is the \
                     stable name of the core error kind of a subclass (None here)."
            }
        }
    }

    fn cell(self) -> &'static PyOnceLock<Py<PyType>> {
        static CELLS: [PyOnceLock<Py<PyType>>; 11] = [
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
            PyOnceLock::new(),
        ];
        &CELLS[self as usize]
    }

    /// The class object, made on first use.
    pub fn type_object(self, py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
        let ty = self.cell().get_or_try_init(py, || self.make(py))?;
        Ok(ty.bind(py).clone())
    }

    fn make(self, py: Python<'_>) -> PyResult<Py<PyType>> {
        let bases = match self {
            Exc::Krabka => PyTuple::new(py, [py.get_type::<PyException>()])?,
            Exc::Format | Exc::Encode | Exc::InvalidArgument => PyTuple::new(
                py,
                [Exc::Krabka.type_object(py)?, py.get_type::<PyValueError>()],
            )?,
            _ => PyTuple::new(py, [Exc::Krabka.type_object(py)?])?,
        };
        let namespace = PyDict::new(py);
        namespace.set_item("__module__", PUBLIC_MODULE)?;
        namespace.set_item("__doc__", self.doc())?;
        namespace.set_item("kind", self.kind().map(ErrorKind::name))?;
        let ty = py
            .get_type::<PyType>()
            .call1((self.name(), bases, namespace))?;
        Ok(ty.cast_into::<PyType>()?.unbind())
    }

    /// A new exception of this class with `message` (not yet raised).
    pub fn new_err(self, py: Python<'_>, message: impl Into<String>) -> PyErr {
        match self.type_object(py) {
            Ok(ty) => PyErr::from_type(ty, message.into()),
            Err(e) => e,
        }
    }
}

/// Adds every exception class to the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    for exc in Exc::ALL {
        module.add(exc.name(), exc.type_object(py)?)?;
    }
    Ok(())
}

/// Sets an attribute on the exception instance of `err`, keeping `err` when
/// that fails (an error here must not replace the one being reported).
fn with_attr(py: Python<'_>, err: PyErr, name: &str, value: &str) -> PyErr {
    match err.value(py).setattr(name, PyString::new(py, value)) {
        Ok(()) => err,
        Err(e) => e,
    }
}

/// The Python exception of a core error: the class of its kind, the part
/// and field of a format or encode error, and the cause chain.
pub fn error_to_py(py: Python<'_>, e: &Error) -> PyErr {
    let d = details(e);
    let mut err = Exc::of_kind(d.kind).new_err(py, message(e, Caller::Python));
    if let Some(part) = d.part {
        err = with_attr(py, err, "part", part);
    }
    if let Some(field) = d.field {
        err = with_attr(py, err, "field", field);
    }
    if let Some(source) = e.source() {
        err.set_cause(py, Some(cause_to_py(py, source)));
    }
    err
}

/// [`error_to_py`] for an owned error.
pub fn to_py_err(py: Python<'_>, e: Error) -> PyErr {
    error_to_py(py, &e)
}

/// One link of a cause chain as a Python exception (see the module
/// documentation).
fn cause_to_py(py: Python<'_>, cause: &(dyn StdError + 'static)) -> PyErr {
    if let Some(pyerr) = cause.downcast_ref::<PyErr>() {
        return pyerr.clone_ref(py);
    }
    if let Some(core) = cause.downcast_ref::<Error>() {
        return error_to_py(py, core);
    }
    if let Some(SharedError(core)) = cause.downcast_ref::<SharedError>() {
        return error_to_py(py, core);
    }
    // What an OAUTHBEARER token provider returned (an `oauth_token`
    // callable's exception): the link is only its carrier.
    if let Some(provided) = cause.downcast_ref::<TokenProviderError>() {
        return cause_to_py(py, provided.get_ref());
    }
    let err = Exc::Krabka.new_err(py, message(cause, Caller::Python));
    if let Some(next) = cause.source() {
        err.set_cause(py, Some(cause_to_py(py, next)));
    }
    err
}

/// The Python exception of an argument refusal of the shared crate: a
/// value refusal is the core's `INVALID_ARGUMENT` (worded like every other:
/// the message names the argument and the value, the class says the kind).
pub fn arg_error(py: Python<'_>, e: ArgError) -> PyErr {
    match e.kind {
        ArgErrorKind::Type => PyTypeError::new_err(e.message),
        ArgErrorKind::Overflow => PyOverflowError::new_err(e.message),
        ArgErrorKind::Value => error_to_py(py, &Error::from(e)),
    }
}

/// `FormatError` with `.part` for a core format error.
pub fn format_error(py: Python<'_>, e: &CoreFormatError) -> PyErr {
    error_to_py(py, &Error::Format(e.clone()))
}

/// `EncodeError` with `.part` and `.field` for a core encode error.
pub fn encode_error(py: Python<'_>, e: &CoreEncodeError) -> PyErr {
    error_to_py(py, &Error::Encode(e.clone()))
}

/// Turns a core `Result` into a `PyResult` through the one mapping.
pub trait IntoPyResult<T> {
    /// The result with a core error mapped to its Python exception.
    fn into_py_result(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, Error> {
    fn into_py_result(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| error_to_py(py, &e))
    }
}

impl<T> IntoPyResult<T> for Result<T, CoreFormatError> {
    fn into_py_result(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| format_error(py, &e))
    }
}

impl<T> IntoPyResult<T> for Result<T, CoreEncodeError> {
    fn into_py_result(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| encode_error(py, &e))
    }
}

impl<T> IntoPyResult<T> for Result<T, ArgError> {
    fn into_py_result(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| arg_error(py, e))
    }
}

/// An error with a message and an optional source, to build cause chains in
/// [`_raise_core_error`].
#[derive(Debug)]
struct Chained {
    message: String,
    source: Option<Box<dyn StdError + Send + Sync>>,
}

impl std::fmt::Display for Chained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for Chained {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn StdError + 'static))
    }
}

/// Raises the Python exception the mapping makes of a core error of
/// `variant`; `cause`, if given, is an exception set as the root of the
/// error's source chain (through a plain Rust error in between for
/// `"fatal"`), to check that a Python exception travels through the core.
/// `"shared"` is a fatal error whose cause is a shared transient error (the
/// reason a leadership ended), to check a core cause keeps its class.
///
/// Internal: tests the mapping of every kind.
#[pyfunction]
#[pyo3(signature = (variant, message, cause=None))]
pub fn _raise_core_error(
    py: Python<'_>,
    variant: &str,
    message: &str,
    cause: Option<Bound<'_, PyAny>>,
) -> PyResult<()> {
    let root: Option<Box<dyn StdError + Send + Sync>> =
        cause.map(|c| Box::new(PyErr::from_value(c)) as _);
    let err = match variant {
        "format" => Error::Format(CoreFormatError::new(krabka_coordination::Part::LeaseValue, message)),
        "encode" => Error::Encode(CoreEncodeError {
            part: krabka_coordination::Part::Key,
            field: "role",
            message: message.to_owned(),
        }),
        "invalid_argument" => Error::InvalidArgument(message.to_owned()),
        "fenced" => Error::Fenced(message.to_owned()),
        "resigned" => Error::Resigned,
        "cancelled" => Error::Cancelled,
        "transient" => match root {
            Some(root) => Error::Transient { context: message.to_owned(), source: root },
            None => Error::transient(message, "the broker did not answer"),
        },
        "fatal" => Error::Fatal {
            context: message.to_owned(),
            source: Box::new(Chained { message: "the topic has the wrong shape".to_owned(), source: root }),
        },
        "lease_expired" => Error::LeaseExpired(message.to_owned()),
        "outcome_unknown" => Error::OutcomeUnknown {
            context: message.to_owned(),
            source: Box::new(Error::Fenced("newer epoch".to_owned())),
        },
        "shared" => Error::fatal(
            message,
            SharedError(std::sync::Arc::new(Error::transient("renewing", "the broker did not answer"))),
        ),
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown variant {other:?}: format, encode, invalid_argument, fenced, resigned, cancelled, transient, fatal, lease_expired, outcome_unknown, shared"
            )))
        }
    };
    Err(error_to_py(py, &err))
}
