'use strict'
// The error classes of the package, one per core error kind, and the
// factory the native addon builds its errors with (src/error.rs chooses
// the code by the core's ErrorKind; this file only maps a code to its class).
//
// Every error of the package is a KrabkaError: argument refusals too (an
// InvalidArgumentError, whatever was wrong: the type, the range or the
// value). Its stack starts at the caller's line: the frames of this package
// are dropped, and a promise's rejection carries the stack of the call that
// made the promise (see `atCaller`).

const path = require('node:path')

// Each kind's `retryable`, from the core's table (registerKinds).
const RETRYABLE = new Map()

/** Base class of every error the package throws. */
class KrabkaError extends Error {
  constructor(message, options) {
    super(message, options)
    this.name = new.target.name
    if (new.target.code !== undefined) this.code = new.target.code
    this.retryable = RETRYABLE.get(this.code) ?? false
    Error.captureStackTrace?.(this, new.target)
    trimStack(this)
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

/** Records each kind's `retryable` (the core's `errorKinds()` table). */
function registerKinds(kinds) {
  for (const k of kinds) RETRYABLE.set(k.code, k.retryable)
}

// The package's own files: frames in them are not the caller's.
const PKG = path.resolve(__dirname, '..') + path.sep
const OWN = [path.join(PKG, 'lib') + path.sep, path.join(PKG, 'index.js'), path.join(PKG, 'index.mjs')]
const isOwnFrame = (line) => /^\s+at /.test(line) && OWN.some((p) => line.includes(p))

/** Drops the package's own frames from `error.stack`, keeping the header. */
function trimStack(error) {
  const stack = error.stack
  if (typeof stack !== 'string') return
  const lines = stack.split('\n')
  const first = lines.findIndex((l) => /^\s+at /.test(l))
  if (first < 0) return
  const frames = lines.slice(first).filter((l) => !isOwnFrame(l))
  if (frames.length > 0) error.stack = [...lines.slice(0, first), ...frames].join('\n')
}

/** Builds the error the native addon describes (see src/error.rs). */
function makeError(spec) {
  const options = spec.cause === undefined ? undefined : { cause: spec.cause }
  if (spec.class === 'plain') return new Error(spec.message, options)
  // 'type' and 'range' (a wrong type, an integer too wide) are argument
  // refusals like any other: an InvalidArgumentError with `field`.
  const error = new (CLASSES[spec.code] ?? KrabkaError)(spec.message, options)
  error.code = spec.code
  error.retryable = RETRYABLE.get(spec.code) ?? false
  if (spec.part !== undefined) error.part = spec.part
  if (spec.field !== undefined) error.field = spec.field
  return error
}

/** An InvalidArgumentError of a JavaScript-only argument, worded like the
 * shared crate's. */
function argTypeError(field, expected, value) {
  const got = value === null ? 'null' : Array.isArray(value) ? 'Array' : typeof value
  const error = new InvalidArgumentError(`${field} must be ${expected}, got ${got}`)
  error.field = field
  return error
}

/**
 * `start()`'s promise, whose rejection with a KrabkaError gets the stack of
 * this call's caller (`fn`, the package's public method, and the frames
 * above it are left out): an error made when the promise settles has no
 * frame of the application otherwise. `start` may throw: the error is
 * rejected as it is.
 */
function atCaller(fn, start) {
  const site = {}
  Error.captureStackTrace?.(site, fn)
  let running
  try {
    running = start()
  } catch (e) {
    return Promise.reject(e)
  }
  return Promise.resolve(running).catch((e) => {
    if (e instanceof KrabkaError && typeof site.stack === 'string') {
      const frames = site.stack.split('\n').filter((l) => /^\s+at /.test(l) && !isOwnFrame(l))
      const own = String(e.stack).split('\n')
      const first = own.findIndex((l) => /^\s+at /.test(l))
      const header = first < 0 ? own : own.slice(0, first)
      e.stack = [...header, ...frames].join('\n')
    }
    throw e
  })
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
  registerKinds,
  argTypeError,
  atCaller,
}
