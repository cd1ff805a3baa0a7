'use strict'
// client.lead on the real Kafka (KRABKA_BOOTSTRAP): the core's leader loop
// driven with a JavaScript work function. Two members alternate: a, in this
// process, hands the role over by returning from its first term; b, a
// member process (member.js --lead), leads and is SIGKILLed; a leads again
// and is stopped, resigning. Plus a failing work, a stopped waiting loop,
// and refused arguments.

const test = require('node:test')
const assert = require('node:assert/strict')
const kc = require('..')
const { kafka, closeShared, uniqueRole, members, waitUntil, Member, tokenOf } = require('./support')

// A 3 s lease renewed every second, half a second between challenger ranks.
const SHORT = { leaseDuration: 3, renewInterval: 1, challengeStagger: 0.5 }

test.after(() => closeShared())

/** A promise and its resolve function. */
function deferred() {
  let resolve
  const promise = new Promise((r) => (resolve = r))
  return { promise, resolve }
}

/** `promise`, or a failure naming `what` after `ms`. */
function within(promise, ms, what) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

test('two members alternate under lead: a hand-over, a SIGKILL, then a stop that resigns', async () => {
  const { settings, client } = await kafka()
  const role = uniqueRole('lead-alternate')
  const own = new kc.Client(settings)
  const stop = new AbortController()
  const terms = [deferred(), deferred()]
  const kinds = []
  let b
  let loop
  try {
    let number = 0
    loop = own.lead(
      role,
      'a',
      async (leadership, signal) => {
        const n = number++
        assert.equal(leadership.isHeld, true)
        terms[n]?.resolve({ token: leadership.token, leadership })
        if (n === 0) {
          // The hand-over: the work returns after about a second, once b
          // waits behind a (so b is next, a contends again from the tail).
          await waitUntil(async () => JSON.stringify(await members(role)) === '["a","b"]', 30_000, 'b to register behind a')
          await new Promise((r) => setTimeout(r, 1000))
          assert.equal(signal.aborted, false, 'the term goes on while the work runs')
          return
        }
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
      },
      { ...SHORT, signal: stop.signal, onEvent: (e) => kinds.push(e.kind) },
    )
    loop.catch(() => {})
    const first = await within(terms[0].promise, 30_000, "a's first term")
    b = new Member(role, 'b', '--lead', '--lease', '3', '--renew', '1', '--stagger', '0.5')
    const termB = await b.expect('term', 30_000)
    const tokenB = tokenOf(termB)
    assert.equal(tokenB.compare(first.token), 1, `b's token ${tokenB} after a's ${first.token}`)
    assert.ok((await client.describeLeadership(role)).authoritative(tokenB), 'describe agrees: b leads')
    assert.equal(first.leadership.isHeld, false, "a's first term was resigned")
    assert.ok(kinds.includes('resigned'), `a resigned its first term: ${kinds}`)

    // a waits behind b; b is killed: its lease lapses and a leads again.
    await waitUntil(async () => JSON.stringify(await members(role)) === '["b","a"]', 30_000, 'a to contend again behind b')
    b.kill('SIGKILL')
    assert.equal((await b.exited).signal, 'SIGKILL')
    const second = await within(terms[1].promise, 30_000, "a's second term")
    assert.equal(second.token.compare(tokenB), 1, `a's second token ${second.token} after b's ${tokenB}`)
    assert.ok((await client.describeLeadership(role)).authoritative(second.token), 'describe agrees: a leads again')

    // Stopped: the term's signal aborts, the work returns, the role is resigned.
    stop.abort()
    await within(loop, 20_000, 'the loop to end after the stop')
    assert.equal(second.leadership.isHeld, false)
    const report = await client.describeRoleState(role)
    assert.equal(report.lease, null, 'no lease after the stop')
    assert.ok(!report.members.includes('a'), `a is deregistered: ${report.members}`)
    assert.deepEqual(kinds.slice(-2), ['resigned', 'deregistered'])
    assert.equal(kinds.filter((k) => k === 'elected').length, 2, `two terms: ${kinds}`)
  } finally {
    stop.abort()
    b?.kill()
    await loop?.catch(() => {})
    own.close()
  }
})

test("a work that fails ends the loop with its error, after resigning", async () => {
  const { settings, client } = await kafka()
  const role = uniqueRole('lead-fails')
  const own = new kc.Client(settings)
  try {
    let held
    const boom = new Error('the work failed')
    await assert.rejects(
      own.lead(
        role,
        'a',
        async (leadership) => {
          held = leadership
          throw boom
        },
        SHORT,
      ),
      (e) => e === boom,
    )
    assert.equal(held.isHeld, false)
    assert.ok(held.error instanceof kc.ResignedError, `${held.error}`)
    const report = await client.describeRoleState(role)
    assert.equal(report.lease, null)
    assert.deepEqual(report.members, [])
  } finally {
    own.close()
  }
})

test('stopping a loop that waits deregisters its member', async () => {
  const { settings } = await kafka()
  const role = uniqueRole('lead-stop-waiting')
  const holder = new kc.Client(settings)
  const waiter = new kc.Client(settings)
  try {
    const a = await holder.acquireLeadership(role, 'a', SHORT)
    const stop = new AbortController()
    let ran = false
    const kinds = []
    const loop = waiter.lead(
      role,
      'b',
      async () => {
        ran = true
      },
      { ...SHORT, signal: stop.signal, onEvent: (e) => kinds.push(e.kind) },
    )
    await waitUntil(async () => JSON.stringify(await members(role)) === '["a","b"]', 20_000, 'b to register behind a')
    stop.abort()
    await within(loop, 20_000, 'the stopped loop to end')
    assert.equal(ran, false, 'no term was run')
    assert.deepEqual(await members(role), ['a'], 'b is deregistered')
    assert.equal(kinds[0], 'registered')
    assert.equal(kinds.at(-1), 'deregistered')
    assert.ok(a.isHeld)
    await a.resign()
  } finally {
    holder.close()
    waiter.close()
  }
})

test('lead refuses bad arguments before any I/O', async () => {
  // Nothing answers at 127.0.0.1:1: a refusal is not a connection error.
  const c = new kc.Client({ 'bootstrap.servers': '127.0.0.1:1' })
  try {
    const work = async () => {}
    await assert.rejects(c.lead('r', 'm', 'not a function'), (e) => e instanceof kc.InvalidArgumentError && /work/.test(e.message))
    await assert.rejects(c.lead('', 'm', work), (e) => e instanceof kc.InvalidArgumentError && /empty/.test(e.message))
    await assert.rejects(c.lead('r', 'm\0', work), (e) => e instanceof kc.InvalidArgumentError && /NUL/.test(e.message))
    await assert.rejects(
      c.lead('r', 'm', work, { leaseDuration: 1, renewInterval: 2 }),
      (e) => e instanceof kc.InvalidArgumentError && /must exceed the renew interval/.test(e.message),
    )
    await assert.rejects(c.lead('r', 'm', work, { leaseDuration: -1 }), (e) => e instanceof kc.InvalidArgumentError && /lease/.test(e.message))
    await assert.rejects(c.lead('r', 'm', work, { signal: 'no' }), (e) => e instanceof kc.InvalidArgumentError && /signal/.test(e.message))
    await assert.rejects(c.lead('r', 'm', work, { onEvent: 1 }), (e) => e instanceof kc.InvalidArgumentError && /onEvent/.test(e.message))
    assert.equal(c._describeRequests(), 0, 'nothing was sent')
  } finally {
    c.close()
  }
})
