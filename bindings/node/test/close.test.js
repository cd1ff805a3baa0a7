'use strict'
// Closing a client ends everything it started, on a real Kafka
// (KRABKA_BOOTSTRAP): `close()` (and `await using`) resigns what the client
// holds, so another client's standby takes over at once, long before the
// holder's lease would have run out; a pending acquire rejects with a
// CancelledError; a running `lead` resolves; an observer's iteration ends;
// every later call is refused; and a process whose acquire was pending
// exits by itself once its client is closed.

const test = require('node:test')
const assert = require('node:assert/strict')
const kc = require('..')
const { kafka, closeShared, uniqueRole, members, waitUntil, Member } = require('./support')

test.after(() => closeShared())

// A lease long enough that a standby which took over did not wait it out.
const LEASE = 20
const TIMINGS = { leaseDuration: LEASE, renewInterval: 2, challengeStagger: 1 }

test('close() resigns, cancels, stops loops and observers, then refuses every call', async () => {
  const { settings } = await kafka()
  const [heldRole, waitedRole, loopedRole] = ['held', 'waited', 'looped'].map(uniqueRole)
  const other = new kc.Client(settings)
  const holder = new kc.Client(settings)
  try {
    const x = await other.acquireLeadership(waitedRole, 'x', TIMINGS)
    const a = await holder.acquireLeadership(heldRole, 'a', TIMINGS)
    const standby = other.acquireLeadership(heldRole, 'b', { ...TIMINGS, signal: AbortSignal.timeout((LEASE / 2) * 1000) })
    const pending = holder.acquireLeadership(waitedRole, 'a', TIMINGS)
    pending.catch(() => {})
    let terms = 0
    const looped = holder.lead(loopedRole, 'a', async (_l, signal) => {
      terms++
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
    }, TIMINGS)
    const observer = holder.observe(heldRole)
    const views = (async () => {
      const seen = []
      for await (const v of observer) seen.push(v)
      return seen
    })()
    await waitUntil(async () => (await members(heldRole)).join() === 'a,b', 20_000, 'b waiting behind a')
    await waitUntil(async () => (await members(waitedRole)).join() === 'x,a', 20_000, 'a waiting behind x')
    await waitUntil(() => terms === 1, 20_000, 'the loop leading')

    const closedAt = Date.now()
    await holder.close()
    assert.equal(holder.closed, true)
    assert.equal(a.isHeld, false)
    const b = await standby
    const took = (Date.now() - closedAt) / 1000
    assert.ok(b.isHeld && b.token.compare(a.token) > 0, `b holds a newer token: ${b.token} after ${a.token}`)
    assert.ok(took < LEASE / 2, `b took over ${took} s after the close`)
    await assert.rejects(pending, kc.CancelledError)
    assert.deepEqual(await members(waitedRole), ['x'])
    await looped
    assert.equal((await other.describeRoleState(loopedRole)).lease, null)
    assert.ok(Array.isArray(await views))
    assert.equal(observer.closed, true)

    await assert.rejects(holder.acquireLeadership(heldRole, 'a'), /the client is closed/)
    await assert.rejects(holder.describeLeadership(heldRole), /the client is closed/)
    assert.throws(() => holder.observe(heldRole), /the client is closed/)
    await holder.close() // idempotent
    await b.resign()
    await x.resign()
  } finally {
    await holder.close()
    await other.close()
  }
})

test('a process whose acquire is pending exits by itself once its client is closed', async () => {
  const { client } = await kafka()
  const role = uniqueRole('close-pending')
  const a = await client.acquireLeadership(role, 'a', TIMINGS)
  const b = new Member(role, 'b', '--close-on-stdin', '--lease', String(LEASE), '--renew', '2', '--stagger', '1')
  try {
    await b.expect('start', 30_000)
    await waitUntil(async () => (await members(role)).join() === 'a,b', 30_000, 'b waiting behind a')
    b.send('close')
    const cancelled = await b.expect('acquire_cancelled', 15_000)
    assert.equal(cancelled.code, 'CANCELLED')
    await b.expect('closed', 15_000)
    const exit = await Promise.race([b.exited, new Promise((r) => setTimeout(() => r(null), 15_000))])
    assert.ok(exit !== null, `the process did not exit after close; events: ${JSON.stringify(b.seen.map((e) => e.event))}`)
    assert.equal(exit.code, 0, b.stderr)
    assert.ok(b.seen.some((e) => e.event === 'exited'))
    assert.deepEqual(await members(role), ['a'])
  } finally {
    b.kill()
    await a.resign()
  }
})
