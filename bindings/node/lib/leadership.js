'use strict'
// The held leadership of a role: a thin class over the native handle
// (src/leadership.rs); every operation is the core's.

const { EventEmitter } = require('node:events')
const { atCaller } = require('./errors')
const { checkOptions } = require('./options')

const WRITE_OPTIONS = ['key', 'partition', 'headers', 'signal']
const SIGNAL_OPTIONS = ['signal']
const { signalOf, aborted, abortable } = require('./signal')

const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')

// A guarded write is one transaction: it is never cut in half. A signal
// aborted at the call rejects before anything is sent; once the write is
// under way it settles with its own outcome (an abort cannot take records
// back, and the caller must know whether they committed).
function guarded(signal, start) {
  if (signal?.aborted) return Promise.reject(aborted('the guarded write', signal))
  return start()
}

/** The events of a leadership as an async iterator; ends with the term. */
class LeadershipEvents {
  #stream
  #finished = false

  constructor(stream) {
    this.#stream = stream
  }

  async next() {
    if (this.#finished) return { done: true, value: undefined }
    const event = await this.#stream.next()
    if (event === null) {
      this.#finished = true
      return { done: true, value: undefined }
    }
    return { done: false, value: event }
  }

  async return() {
    this.#finished = true
    return { done: true, value: undefined }
  }

  [Symbol.asyncIterator]() {
    return this
  }
}

class Leadership extends EventEmitter {
  #native
  #error = null
  #pumping = false

  constructor(native) {
    super()
    this.#native = native
    // Settles when the term ends; resolves with the reason, never rejects.
    this.done = native.wait().then(() => this.error)
    this.on('newListener', () => this.#pump())
  }

  get token() {
    return this.#native.token
  }

  get role() {
    return this.#native.role
  }

  get member() {
    return this.#native.member
  }

  get partition() {
    return this.#native.partition
  }

  get lease() {
    return this.#native.lease
  }

  get leaseLeft() {
    return this.#native.leaseLeft
  }

  get renewalFailures() {
    return this.#native.renewalFailures
  }

  get isHeld() {
    return this.#native.isHeld
  }

  get error() {
    if (this.#error === null) this.#error = this.#native.error()
    return this.#error
  }

  write(topic, value, options) {
    return atCaller(this.write, () => {
      checkOptions(options, 'write', WRITE_OPTIONS)
      const signal = signalOf(options)
      const record = { topic, value }
      if (options !== undefined) {
        record.key = options.key
        record.partition = options.partition
        record.headers = options.headers
      }
      return guarded(signal, () => this.#native.write([record]))
    })
  }

  writeRecords(records, options) {
    return atCaller(this.writeRecords, () => {
      checkOptions(options, 'writeRecords', SIGNAL_OPTIONS)
      return guarded(signalOf(options), () => this.#native.write(records))
    })
  }

  // The records and the input offsets they were made from, in one
  // transaction: a guarded write (the same signal rule, the same refusal
  // after a resign); the offsets are checked by the core at the call.
  writeWithOffsets(records, offsets, options) {
    return atCaller(this.writeWithOffsets, () => {
      checkOptions(options, 'writeWithOffsets', SIGNAL_OPTIONS)
      return guarded(signalOf(options), () => this.#native.writeWithOffsets(records, offsets))
    })
  }

  // A read: an abort stops the waiting, the read goes on in the background
  // and its outcome is dropped.
  committedOffsets(group, partitions, options) {
    return atCaller(this.committedOffsets, () => {
      checkOptions(options, 'committedOffsets', SIGNAL_OPTIONS)
      return abortable(signalOf(options), 'committedOffsets', () => this.#native.committedOffsets(group, partitions))
    })
  }

  // The resign runs to its end in the core once started (the lease cleared,
  // the token superseded, the member deregistered); an abort only stops the
  // waiting for it, and `done` settles once it ended. From this call on, a
  // write of this leadership rejects with a ResignedError (the core marks
  // the resign at the native call, made here synchronously).
  resign(options) {
    return atCaller(this.resign, () => {
      checkOptions(options, 'resign', SIGNAL_OPTIONS)
      return abortable(signalOf(options), 'resign', () => this.#native.resign())
    })
  }

  // `await using`: resigns a role still held.
  async [asyncDispose]() {
    if (this.isHeld) await this.resign()
  }

  events() {
    return new LeadershipEvents(this.#native.events())
  }

  [Symbol.asyncIterator]() {
    return this.events()
  }

  // Relays the events to the emitter from the first listener on.
  #pump() {
    if (this.#pumping) return
    this.#pumping = true
    const events = this.events()
    queueMicrotask(async () => {
      for await (const event of events) {
        this.emit('event', event)
        this.emit(event.kind, event)
      }
      this.emit('end', this.error)
    })
  }

  toString() {
    return `Leadership(${JSON.stringify(this.role)}, ${JSON.stringify(this.member)}, ${this.token}, held=${this.isHeld})`
  }
}

module.exports = { Leadership, LeadershipEvents }
