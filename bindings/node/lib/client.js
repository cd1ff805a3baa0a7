'use strict'
// The client: a thin class over the native one (src/client.rs). Every
// operation is the core's; this file adds what is about JavaScript only:
// AbortSignal, an acquire's onEvent callback, wrapping a won leadership
// and an observer, and driving the core's leader loop (src/lead.rs) with a
// JavaScript work function.

const { CancelledError, FatalError, argTypeError, atCaller } = require('./errors')
const { checkOptions } = require('./options')
const { Leadership } = require('./leadership')
const { Observer } = require('./observer')
const { isSignal, signalOf, abortable } = require('./signal')

const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')

// The option names of each call (lib/options.js refuses any other key).
const ACQUIRE_OPTIONS = ['leaseDuration', 'renewInterval', 'challengeStagger', 'signal', 'onEvent']
const CLIENT_OPTIONS = ['partitions', 'stateTopic', 'connectTimeout', 'operationTimeout', 'oauthToken']
const OBSERVE_OPTIONS = ['renewals', 'signal']
const SIGNAL_OPTIONS = ['signal']
const TOPIC_OPTIONS = ['development', 'replicationFactor', 'minInsyncReplicas', 'signal']

// Calls onEvent with each event `next` resolves with, to its end (null). A
// callback that throws is the process's uncaught error, as an emitter
// listener's is.
async function relay(next, onEvent) {
  for (;;) {
    const event = await next()
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

// Runs `work` once per term of `loop` (a native _LeaderLoop) until the loop
// ends: the core's rules (src/lead.rs, core/src/leadership/lead.rs) decide
// when to resign and how long to back off; this only calls the work with
// the term's leadership and an AbortSignal of the term's end.
async function driveLoop(loop, work) {
  for (;;) {
    const term = await loop.nextTerm()
    if (term === null) return
    const ended = new AbortController()
    const leadership = new Leadership(term.leadership)
    term.ended().then(() => ended.abort(leadership.error ?? new CancelledError('the leader loop was stopped')))
    let failed = false
    let failure
    try {
      await work(leadership, ended.signal)
    } catch (e) {
      failed = true
      failure = e
    }
    await loop.finish(term)
    if (failed) throw failure
  }
}

// The native side's OAUTHBEARER provider (src/oauth.rs) as calls of the
// application's `oauthToken` function: each request, handed over on the
// JavaScript thread, is settled with what the function returned or
// resolved with (checked natively), or with its rejection's message.
function tokenRequests(provide) {
  return (request) => {
    new Promise((resolve) => resolve(provide())).then(
      (value) => request.resolve(value),
      (e) => {
        const message = e instanceof Error ? `${e.name}: ${e.message}` : String(e)
        request.reject(message, e instanceof FatalError)
      },
    )
  }
}

// The first constructor argument of a Client made on a native client that
// already exists (a test-kit process's, lib/testing.js); module-private, so
// no caller's settings object can be taken for it.
const ON_NATIVE = Symbol('krabka-coordination: on a native client')

function makeClient(native) {
  class Client {
    #native

    constructor(kafka, options) {
      if (kafka === ON_NATIVE) {
        this.#native = options
        return
      }
      checkOptions(options, 'new Client', CLIENT_OPTIONS)
      if (options !== null && typeof options === 'object' && options.oauthToken != null) {
        const provide = options.oauthToken
        if (typeof provide !== 'function') throw argTypeError('oauth_token', 'a function', provide)
        options = { ...options, oauthToken: tokenRequests(provide) }
      }
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

    acquireLeadership(role, member, options) {
      return atCaller(this.acquireLeadership, () => this.#acquire(role, member, options))
    }

    async #acquire(role, member, options) {
      checkOptions(options, 'acquireLeadership', ACQUIRE_OPTIONS)
      let signal
      if (options !== undefined && options.signal !== undefined) {
        signal = options.signal
        if (!isSignal(signal)) throw argTypeError('signal', 'an AbortSignal', signal)
      }
      let onEvent
      if (options !== undefined && options.onEvent !== undefined) {
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
          relay(() => events.next(), onEvent).catch((e) =>
            process.nextTick(() => {
              throw e
            }),
          )
        }
        let won
        try {
          won = await acquiring
        } catch (e) {
          // Cancelled by the signal: the reason is the cause (a
          // TimeoutError DOMException for AbortSignal.timeout).
          if (signal?.aborted && e instanceof CancelledError) {
            throw new CancelledError('the acquire was aborted; the member was deregistered', { cause: signal.reason })
          }
          throw e
        }
        const leadership = new Leadership(won)
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

    async lead(role, member, work, options) {
      if (typeof work !== 'function') throw argTypeError('work', 'a function', work)
      checkOptions(options, 'lead', ACQUIRE_OPTIONS)
      const signal = options?.signal
      if (signal !== undefined && !isSignal(signal)) throw argTypeError('signal', 'an AbortSignal', signal)
      const onEvent = options?.onEvent
      if (onEvent !== undefined && typeof onEvent !== 'function') throw argTypeError('onEvent', 'a function', onEvent)
      // Checks the role, the member and the timings before any I/O.
      const loop = this.#native._lead(role, member, options, onEvent !== undefined)
      // Every event is delivered before the promise settles.
      const relaying =
        onEvent === undefined
          ? undefined
          : relay(() => loop.nextEvent(), onEvent).catch((e) =>
              process.nextTick(() => {
                throw e
              }),
            )
      const onAbort = () => loop.stop()
      if (signal?.aborted) loop.stop()
      signal?.addEventListener('abort', onAbort, { once: true })
      try {
        await driveLoop(loop, work)
      } finally {
        signal?.removeEventListener('abort', onAbort)
        loop.end()
        await relaying
      }
    }

    observe(roles, options) {
      if (typeof roles === 'string') roles = [roles]
      else if (!Array.isArray(roles)) throw argTypeError('roles', 'a string or an array of strings', roles)
      checkOptions(options, 'observe', OBSERVE_OPTIONS)
      const signal = options?.signal
      if (signal !== undefined && !isSignal(signal)) throw argTypeError('signal', 'an AbortSignal', signal)
      return new Observer(this.#native._observe(roles, options?.renewals), signal)
    }

    describeLeadership(role, options) {
      return atCaller(this.describeLeadership, () => {
        checkOptions(options, 'describeLeadership', SIGNAL_OPTIONS)
        return abortable(signalOf(options), 'describeLeadership', () => this.#native.describeLeadership(role))
      })
    }

    describeRoleState(role, options) {
      return atCaller(this.describeRoleState, () => {
        checkOptions(options, 'describeRoleState', SIGNAL_OPTIONS)
        return abortable(signalOf(options), 'describeRoleState', () => this.#native.describeRoleState(role))
      })
    }

    ensureStateTopic(options) {
      return atCaller(this.ensureStateTopic, () => {
        checkOptions(options, 'ensureStateTopic', TOPIC_OPTIONS)
        return abortable(signalOf(options), 'ensureStateTopic', () => this.#native.ensureStateTopic(options))
      })
    }

    checkStateTopic(options) {
      return atCaller(this.checkStateTopic, () => {
        checkOptions(options, 'checkStateTopic', SIGNAL_OPTIONS)
        return abortable(signalOf(options), 'checkStateTopic', () => this.#native.checkStateTopic())
      })
    }

    close() {
      return this.#native.close()
    }

    async [asyncDispose]() {
      await this.close()
    }

    _describeRequests() {
      return this.#native._describeRequests()
    }
  }
  return Client
}

/** A `Client` (of `makeClient`) on `nativeClient`, a `_Client` already built. */
function clientOn(Client, nativeClient) {
  return new Client(ON_NATIVE, nativeClient)
}

module.exports = { makeClient, clientOn }
