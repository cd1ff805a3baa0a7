//! The one place where errors of the core become Python exceptions.
//!
//! # The hierarchy
//!
//! ```text
//! KrabkaError(Exception)                 base of everything this package raises
//! ├── FormatError(KrabkaError, ValueError)          malformed bytes; .part
//! ├── EncodeError(KrabkaError, ValueError)          the layout cannot hold a value; .part, .field
//! ├── InvalidArgumentError(KrabkaError, ValueError) an argument the core refuses
//! ├── Fenced(KrabkaError)                           the broker fenced this member's epoch
//! ├── TransientError(KrabkaError)                   retrying may succeed
//! ├── FatalError(KrabkaError)                       retrying will not succeed
//! ├── Resigned(KrabkaError)                         the leadership was given up
//! └── Cancelled(KrabkaError)                        the operation was cancelled
//! ```
//!
//! The classes are made once per interpreter (with `type(name, bases, ns)`,
//! because two of them have two bases) and live in [`PyOnceLock`]s; the module
//! exports them under `krabka_coordination`.
//!
//! # Mapping
//!
//! [`to_py_err`] maps every variant of [`Error`]; [`format_error`] and
//! [`encode_error`] map the codec's own error types. The Rust `source()`
//! chain of a transient or fatal error becomes the `__cause__` chain of the
//! Python exception. A link that is itself a Python exception (a [`PyErr`], as
//! a callback written in Python will produce once the leadership API exists)
//! is attached as it is, so its type and traceback survive the trip through
//! the core.
//!
//! Integer arguments that do not fit their field are refused by
//! [`crate::convert`] with an `OverflowError` that names the field; that is
//! argument checking, not a core error, and is not mapped here.

use std::error::Error as StdError;

use krabka_coordination::{EncodeError as CoreEncodeError, Error, FormatError as CoreFormatError};
use pyo3::exceptions::{PyException, PyValueError};
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
    /// `FormatError(KrabkaError, ValueError)`: malformed record bytes.
    Format,
    /// `EncodeError(KrabkaError, ValueError)`: a value the layout cannot hold.
    Encode,
    /// `InvalidArgumentError(KrabkaError, ValueError)`: an argument the core refuses.
    InvalidArgument,
    /// `Fenced(KrabkaError)`: this member's epoch was superseded.
    Fenced,
    /// `TransientError(KrabkaError)`: a failure that retrying may mend.
    Transient,
    /// `FatalError(KrabkaError)`: a failure that retrying will not mend.
    Fatal,
    /// `Resigned(KrabkaError)`: the leadership was given up.
    Resigned,
    /// `Cancelled(KrabkaError)`: the operation was cancelled before it finished.
    Cancelled,
}

impl Exc {
    /// Every class, base first (the order they are created in).
    pub const ALL: [Exc; 9] = [
        Exc::Krabka,
        Exc::Format,
        Exc::Encode,
        Exc::InvalidArgument,
        Exc::Fenced,
        Exc::Transient,
        Exc::Fatal,
        Exc::Resigned,
        Exc::Cancelled,
    ];

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
        }
    }

    fn doc(self) -> &'static str {
        match self {
            Exc::Krabka => "Base class of every exception krabka_coordination raises.",
            Exc::Format => {
                "Malformed record bytes.\n\n`part` names the record part that failed to decode: \
                 \"key\", \"registration value\" or \"lease value\". The message says which \
                 field failed, at which byte offset, and why."
            }
            Exc::Encode => {
                "A value the frozen record layout cannot hold (an empty or over-long role or \
                 member).\n\n`part` names the record part being encoded and `field` the field \
                 that cannot be encoded. Encoding refuses rather than truncating."
            }
            Exc::InvalidArgument => "An argument the core refuses; the message names the value.",
            Exc::Fenced => {
                "The broker rejected a write of a superseded epoch (INVALID_PRODUCER_EPOCH, \
                 PRODUCER_FENCED), or the member otherwise lost its epoch. Stop the work of the role."
            }
            Exc::Transient => {
                "A transient failure (broker unreachable, timeout, coordinator moving); the \
                 operation may be retried. `__cause__` holds the underlying error."
            }
            Exc::Fatal => {
                "A failure that retrying will not mend (authorization, bad configuration, a \
                 topic of the wrong shape). `__cause__` holds the underlying error."
            }
            Exc::Resigned => "The leadership was given up by resign().",
            Exc::Cancelled => "The operation was cancelled before it finished.",
        }
    }

    fn cell(self) -> &'static PyOnceLock<Py<PyType>> {
        static CELLS: [PyOnceLock<Py<PyType>>; 9] = [
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
/// that fails (it cannot for these plain classes, but an error here must not
/// replace the one being reported).
fn with_attr(py: Python<'_>, err: PyErr, name: &str, value: &str) -> PyErr {
    match err.value(py).setattr(name, PyString::new(py, value)) {
        Ok(()) => err,
        Err(e) => e,
    }
}

/// `FormatError` with `.part` for a core format error.
pub fn format_error(py: Python<'_>, e: &CoreFormatError) -> PyErr {
    let err = Exc::Format.new_err(py, e.to_string());
    with_attr(py, err, "part", e.part.as_str())
}

/// `EncodeError` with `.part` and `.field` for a core encode error.
pub fn encode_error(py: Python<'_>, e: &CoreEncodeError) -> PyErr {
    let err = Exc::Encode.new_err(py, e.to_string());
    let err = with_attr(py, err, "part", e.part.as_str());
    with_attr(py, err, "field", e.field)
}

/// Maps an error of the core to its Python exception, with the cause chain.
pub fn to_py_err(py: Python<'_>, e: Error) -> PyErr {
    error_to_py(py, &e)
}

/// [`to_py_err`] for an error the caller keeps (a shared one, such as the
/// reason a leadership ended): the same mapping, by reference.
pub fn error_to_py(py: Python<'_>, e: &Error) -> PyErr {
    match e {
        Error::Format(f) => format_error(py, f),
        Error::Encode(f) => encode_error(py, f),
        Error::InvalidArgument(_) => Exc::InvalidArgument.new_err(py, e.to_string()),
        Error::Fenced(_) => Exc::Fenced.new_err(py, e.to_string()),
        Error::Resigned => Exc::Resigned.new_err(py, e.to_string()),
        Error::Cancelled => Exc::Cancelled.new_err(py, e.to_string()),
        Error::Transient { source, .. } => {
            with_cause(py, Exc::Transient.new_err(py, e.to_string()), &**source)
        }
        Error::Fatal { source, .. } => {
            with_cause(py, Exc::Fatal.new_err(py, e.to_string()), &**source)
        }
        // `Error` is non-exhaustive: a variant added later still surfaces as
        // the base class rather than failing to compile or panicking.
        #[allow(unreachable_patterns)]
        _ => Exc::Krabka.new_err(py, e.to_string()),
    }
}

/// Sets `cause` (and its own `source()` chain) as the `__cause__` chain of `err`.
fn with_cause(py: Python<'_>, err: PyErr, cause: &(dyn StdError + 'static)) -> PyErr {
    err.set_cause(py, Some(cause_to_py(py, cause)));
    err
}

/// One link of a cause chain as a Python exception: a Python exception that
/// travelled through the core is itself; anything else becomes a
/// `KrabkaError` carrying its message, linked on to its own source.
fn cause_to_py(py: Python<'_>, cause: &(dyn StdError + 'static)) -> PyErr {
    if let Some(pyerr) = cause.downcast_ref::<PyErr>() {
        return pyerr.clone_ref(py);
    }
    let err = Exc::Krabka.new_err(py, cause.to_string());
    match cause.source() {
        Some(next) => with_cause(py, err, next),
        None => err,
    }
}

/// An error that becomes a Python exception once the interpreter is at hand:
/// the error type of a future run by [`crate::runtime::future_into_py`]
/// (whose result is delivered on a runtime thread, later attached).
pub trait IntoPyErr: Send + 'static {
    /// The Python exception of this error.
    fn into_py_err(self, py: Python<'_>) -> PyErr;
}

impl IntoPyErr for PyErr {
    fn into_py_err(self, _py: Python<'_>) -> PyErr {
        self
    }
}

impl IntoPyErr for Error {
    fn into_py_err(self, py: Python<'_>) -> PyErr {
        to_py_err(py, self)
    }
}

/// Turns a core `Result` into a `PyResult` through [`to_py_err`].
pub trait IntoPyResult<T> {
    /// The result with a core error mapped to its Python exception.
    fn into_py_result(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, Error> {
    fn into_py_result(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py_err(py, e))
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

/// Raises the Python exception that [`to_py_err`] makes of a core error
/// `variant`; `cause`, if given, is an exception set as the root of the
/// error's source chain (through a plain Rust error in between for
/// `"fatal"`), to check that a Python exception travels through the core.
///
/// Internal: it exists to test the one mapping before the leadership API
/// raises these errors for real.
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
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown variant {other:?}: format, encode, invalid_argument, fenced, resigned, cancelled, transient, fatal"
            )))
        }
    };
    Err(to_py_err(py, err))
}
