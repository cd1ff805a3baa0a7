'use strict'
// AbortSignal for the package's promises. An operation that is given a
// signal rejects with a CancelledError (the package's abort error, as an
// aborted acquire's; `cause` is the signal's reason) when the signal is
// already aborted at the call, before anything is sent, or when it aborts
// while the promise waits. What the abort does to the work already under way
// is the operation's own (see index.d.ts): reads and ensureStateTopic go on
// in the background and their outcome is dropped, a resign goes on to its
// end in the core, a guarded write is never cut in half.

const { CancelledError, argTypeError } = require('./errors')

function isSignal(s) {
  return s !== null && typeof s === 'object' && typeof s.aborted === 'boolean' && typeof s.addEventListener === 'function'
}

/** The signal of `options` (checked), or undefined. */
function signalOf(options) {
  if (options === null || typeof options !== 'object') return undefined
  const signal = options.signal
  if (signal === undefined) return undefined
  if (!isSignal(signal)) throw argTypeError('signal', 'an AbortSignal', signal)
  return signal
}

function aborted(what, signal) {
  return new CancelledError(`${what} was aborted`, { cause: signal.reason })
}

/** `start()`'s promise, rejected with a CancelledError as soon as `signal`
 * aborts (at once when it is aborted already: `start` is not called). */
function abortable(signal, what, start) {
  if (signal === undefined) return start()
  if (signal.aborted) return Promise.reject(aborted(what, signal))
  const running = start()
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(aborted(what, signal))
    signal.addEventListener('abort', onAbort, { once: true })
    running.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort))
  })
}

module.exports = { isSignal, signalOf, abortable, aborted }
