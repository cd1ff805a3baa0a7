'use strict'
// The error classes of the package, one per core error kind, and the
// factory the native addon builds its errors with (src/error.rs chooses
// the code by the core's ErrorKind; this file only maps a code to its class).

/** Base class of every error the package throws for a core error kind. */
class KrabkaError extends Error {
  constructor(message, options) {
    super(message, options)
    this.name = new.target.name
    if (new.target.code !== undefined) this.code = new.target.code
  }
}

function kind(name, code) {
  const cls = { [name]: class extends KrabkaError {} }[name]
  cls.code = code
  return cls
}

const FormatError = kind('FormatError', 'FORMAT')
const EncodeError = kind('EncodeError', 'ENCODE')
const InvalidArgumentError = kind('InvalidArgumentError', 'INVALID_ARGUMENT')
const FencedError = kind('FencedError', 'FENCED')
const TransientError = kind('TransientError', 'TRANSIENT')
const FatalError = kind('FatalError', 'FATAL')
const ResignedError = kind('ResignedError', 'RESIGNED')
const CancelledError = kind('CancelledError', 'CANCELLED')
const LeaseExpiredError = kind('LeaseExpiredError', 'LEASE_EXPIRED')
const OutcomeUnknownError = kind('OutcomeUnknownError', 'OUTCOME_UNKNOWN')

const CLASSES = {
  FORMAT: FormatError,
  ENCODE: EncodeError,
  INVALID_ARGUMENT: InvalidArgumentError,
  FENCED: FencedError,
  TRANSIENT: TransientError,
  FATAL: FatalError,
  RESIGNED: ResignedError,
  CANCELLED: CancelledError,
  LEASE_EXPIRED: LeaseExpiredError,
  OUTCOME_UNKNOWN: OutcomeUnknownError,
}

/** Builds the error the native addon describes (see src/error.rs). */
function makeError(spec) {
  const options = spec.cause === undefined ? undefined : { cause: spec.cause }
  let error
  switch (spec.class) {
    case 'type':
      error = new TypeError(spec.message, options)
      break
    case 'range':
      error = new RangeError(spec.message, options)
      break
    case 'plain':
      return new Error(spec.message, options)
    default:
      error = new (CLASSES[spec.code] ?? KrabkaError)(spec.message, options)
  }
  error.code = spec.code
  if (spec.part !== undefined) error.part = spec.part
  if (spec.field !== undefined) error.field = spec.field
  return error
}

/** A TypeError of a JavaScript-only argument, worded like the shared crate's. */
function argTypeError(field, expected, value) {
  const got = value === null ? 'null' : Array.isArray(value) ? 'Array' : typeof value
  const error = new TypeError(`${field} must be ${expected}, got ${got}`)
  error.code = 'INVALID_ARGUMENT'
  error.field = field
  return error
}

module.exports = {
  KrabkaError,
  FormatError,
  EncodeError,
  InvalidArgumentError,
  FencedError,
  TransientError,
  FatalError,
  ResignedError,
  CancelledError,
  LeaseExpiredError,
  OutcomeUnknownError,
  makeError,
  argTypeError,
}
