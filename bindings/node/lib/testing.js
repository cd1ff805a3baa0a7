'use strict'
// krabka-coordination/testing: the core's test kit (src/testing.rs) in
// JavaScript. A cluster's processes have real `Client`s (lib/client.js over
// the process's native client), so the code under test runs unchanged; the
// cluster adds time and faults, and reads back what was committed. Every
// rule is the core's: this file only wraps the native handles.

const { checkOptions } = require('./options')
const { clientOn } = require('./client')

const CLUSTER_OPTIONS = ['partitions']

// Lets the callbacks the runtime queued on the JavaScript thread run (a
// term handed to `client.lead`'s work, an event to a listener), so what they
// start is part of the next settle.
const turn = () => new Promise((resolve) => setImmediate(resolve))

function makeTesting(kc) {
  const { Client } = kc

  class TestProcess {
    #native
    #client

    constructor(native) {
      this.#native = native
      this.#client = clientOn(Client, native.client())
    }

    get name() {
      return this.#native.name
    }

    get state() {
      return this.#native.state
    }

    get client() {
      return this.#client
    }

    crash() {
      this.#native.crash()
    }

    pause() {
      this.#native.pause()
    }

    resume() {
      this.#native.resume()
    }

    cutOff() {
      this.#native.cutOff()
    }

    heal() {
      this.#native.heal()
    }

    failFor(seconds) {
      this.#native.failFor(seconds)
    }
  }

  class TestCluster {
    #native

    constructor(options) {
      checkOptions(options, 'new TestCluster', CLUSTER_OPTIONS)
      this.#native = new kc._TestCluster(options?.partitions)
    }

    process(name) {
      return new TestProcess(this.#native.process(name))
    }

    get now() {
      return BigInt(this.#native.nowMillis)
    }

    // Each time operation starts with a turn (what the test's own calls
    // queued runs first) and ends with one and a settle (what the members'
    // last acts queued on the JavaScript thread runs, and what that starts
    // settles too); the native operation settles the members in between.

    async advance(seconds) {
      await turn()
      await this.#native.advance(seconds)
      await this.#jsThenMembers()
    }

    async advanceToNextDeadline() {
      await turn()
      const at = await this.#native.advanceToNextDeadline()
      await this.#jsThenMembers()
      return at === null ? null : BigInt(at)
    }

    async settle() {
      await turn()
      await this.#native.settle()
      await this.#jsThenMembers()
    }

    async #jsThenMembers() {
      await turn()
      await this.#native.settle()
    }

    guardedWrites() {
      return this.#native.guardedWrites()
    }

    committedOffset(group, topic, partition) {
      return this.#native.committedOffset(group, topic, partition)
    }

    describeLeadership(role) {
      return this.#native.describeLeadership(role)
    }

    setEpoch(role, token) {
      this.#native.setEpoch(role, token)
    }
  }

  return { TestCluster, TestProcess }
}

module.exports = { makeTesting }
