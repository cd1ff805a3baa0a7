'use strict'
// The client: a thin class over the native one (src/client.rs). Every
// operation is the core's; this file adds what is about JavaScript only:
// AbortSignal, an acquire's onEvent callback, and wrapping a won leadership
// and an observer.

const { CancelledError, argTypeError } = require('./errors')
const { Leadership } = require('./leadership')
const { Observer } = require('./observer')

function isSignal(s) {
  return s !== null && typeof s === 'object' && typeof s.aborted === 'boolean' && typeof s.addEventListener === 'function'
}

// Calls onEvent with each event of an acquire's stream, to its end. A
// callback that throws is the process's uncaught error, as an emitter
// listener's is.
async function relay(events, onEvent) {
  for (;;) {
    const event = await events.next()
    if (event === null) return
    try {
      onEvent(event)
    } catch (e) {
      process.nextTick(() => {
        throw e
      })
    }
  }
}

function makeClient(native) {
  class Client {
    #native

    constructor(kafka, options) {
      this.#native = new native._Client(kafka, options)
    }

    get partitions() {
      return this.#native.partitions
    }

    get stateTopic() {
      return this.#native.stateTopic
    }

    get closed() {
      return this.#native.closed
    }

    async acquireLeadership(role, member, options) {
      let signal
      if (options !== null && typeof options === 'object' && options.signal !== undefined) {
        signal = options.signal
        if (!isSignal(signal)) throw argTypeError('signal', 'an AbortSignal', signal)
      }
      let onEvent
      if (options !== null && typeof options === 'object' && options.onEvent !== undefined) {
        onEvent = options.onEvent
        if (typeof onEvent !== 'function') throw argTypeError('onEvent', 'a function', onEvent)
      }
      const cancel = new native._CancelToken()
      // An aborted signal cancels before anything is registered.
      if (signal?.aborted) cancel.cancel()
      const onAbort = () => cancel.cancel()
      signal?.addEventListener('abort', onAbort, { once: true })
      let events
      if (onEvent !== undefined) events = new native._AcquireEvents()
      try {
        const acquiring = this.#native.acquire(role, member, options, cancel, events)
        if (events !== undefined) {
          relay(events, onEvent).catch((e) =>
            process.nextTick(() => {
              throw e
            }),
          )
        }
        const leadership = new Leadership(await acquiring)
        if (signal?.aborted) {
          // Won in the instant of the abort: nobody takes it.
          await leadership.resign().catch(() => {})
          throw new CancelledError('the acquire was aborted; the role won in the same instant was resigned', {
            cause: signal.reason,
          })
        }
        return leadership
      } finally {
        signal?.removeEventListener('abort', onAbort)
      }
    }

    observe(roles, options) {
      if (typeof roles === 'string') roles = [roles]
      else if (!Array.isArray(roles)) throw argTypeError('roles', 'a string or an array of strings', roles)
      if (options !== undefined && (options === null || typeof options !== 'object' || Array.isArray(options))) {
        throw argTypeError('options', 'an object { renewals?, signal? }', options)
      }
      const signal = options?.signal
      if (signal !== undefined && !isSignal(signal)) throw argTypeError('signal', 'an AbortSignal', signal)
      return new Observer(this.#native._observe(roles, options?.renewals), signal)
    }

    async describeLeadership(role) {
      return this.#native.describeLeadership(role)
    }

    async describeRoleState(role) {
      return this.#native.describeRoleState(role)
    }

    async ensureStateTopic(options) {
      return this.#native.ensureStateTopic(options)
    }

    async checkStateTopic() {
      return this.#native.checkStateTopic()
    }

    close() {
      this.#native.close()
    }

    _describeRequests() {
      return this.#native._describeRequests()
    }
  }
  return Client
}

module.exports = { makeClient }
