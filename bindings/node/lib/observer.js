'use strict'
// The observer of roles: a thin class over the native handle
// (src/observe.rs); the views and every rule behind them are the core's.
// This file adds what is about JavaScript: the async iterator, the
// EventEmitter, AbortSignal and Symbol.asyncDispose.
//
// One consumer style per observer: iterating it and listening for 'view'
// both take views from the same stream (each view would go to one of them),
// so using the second style throws (code ERR_OBSERVER_CONSUMER).

const { EventEmitter } = require('node:events')

const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')

function consumerError(using, asked) {
  const error = new Error(
    `this observer is already consumed by ${using}; ${asked} would take views from it too (one consumer style per observer: open another observer)`,
  )
  error.code = 'ERR_OBSERVER_CONSUMER'
  return error
}

class Observer extends EventEmitter {
  #native
  #signal
  #onAbort
  #consumer = null // null, 'iteration' or 'view events'
  #closeEmitted = false

  constructor(native, signal) {
    super()
    this.#native = native
    this.on('newListener', (name) => {
      if (name !== 'view') return
      if (this.#consumer === 'iteration') throw consumerError('an async iterator', "a 'view' listener")
      if (this.#consumer === null) {
        this.#consumer = 'view events'
        queueMicrotask(() => this.#pump())
      }
    })
    if (signal !== undefined) {
      this.#signal = signal
      this.#onAbort = () => this.close()
      if (signal.aborted) this.close()
      else signal.addEventListener('abort', this.#onAbort, { once: true })
    }
  }

  /** The roles watched, sorted, each once. */
  get roles() {
    return this.#native.roles
  }

  /** True once closed (by close(), a break, the signal or an error). */
  get closed() {
    return this.#native.closed
  }

  close() {
    if (!this.#native.closed) this.#native.close()
    this.#signal?.removeEventListener('abort', this.#onAbort)
    // With 'view' listeners the pump emits 'close' once its pending read
    // resolves; otherwise it is emitted here, after the caller's turn.
    if (this.#consumer !== 'view events') process.nextTick(() => this.#emitClose())
  }

  async [asyncDispose]() {
    this.close()
  }

  [Symbol.asyncIterator]() {
    if (this.#consumer === 'view events') throw consumerError("'view' listeners", 'an async iterator')
    if (this.#consumer === 'iteration') throw consumerError('an async iterator', 'a second async iterator')
    this.#consumer = 'iteration'
    const native = this.#native
    const observer = this
    let done = false
    return {
      async next() {
        if (done) return { done: true, value: undefined }
        let view
        try {
          view = await native.next()
        } catch (e) {
          done = true
          observer.close()
          throw e
        }
        if (view === null) {
          done = true
          observer.close()
          return { done: true, value: undefined }
        }
        return { done: false, value: view }
      },
      async return() {
        done = true
        observer.close()
        return { done: true, value: undefined }
      },
      [Symbol.asyncIterator]() {
        return this
      },
    }
  }

  async #pump() {
    for (;;) {
      let view
      try {
        view = await this.#native.next()
      } catch (e) {
        this.close()
        this.#emitClose(e)
        return
      }
      if (view === null) break
      // A listener that throws is the process's uncaught error, as with
      // any emitter; it is not the observer's 'error'.
      this.emit('view', view)
    }
    this.close()
    this.#emitClose()
  }

  #emitClose(error) {
    if (this.#closeEmitted) return
    this.#closeEmitted = true
    try {
      // No 'error' listener: the emitter throws it (the process's uncaught
      // error), as a stream's does; 'close' still follows.
      if (error !== undefined) this.emit('error', error)
    } finally {
      this.emit('close')
    }
  }

  toString() {
    return `Observer(${JSON.stringify(this.roles)}, closed=${this.closed})`
  }
}

module.exports = { Observer }
