'use strict'
// The client: a thin class over the native one (src/client.rs). Every
// operation is the core's; this file adds what is about JavaScript only:
// AbortSignal, and wrapping a won leadership.

const { CancelledError, argTypeError } = require('./errors')
const { Leadership } = require('./leadership')

function isSignal(s) {
  return s !== null && typeof s === 'object' && typeof s.aborted === 'boolean' && typeof s.addEventListener === 'function'
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
      const cancel = new native._CancelToken()
      // An aborted signal cancels before anything is registered.
      if (signal?.aborted) cancel.cancel()
      const onAbort = () => cancel.cancel()
      signal?.addEventListener('abort', onAbort, { once: true })
      try {
        const leadership = new Leadership(await this.#native.acquire(role, member, options, cancel))
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
