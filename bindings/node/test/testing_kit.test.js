'use strict'
// krabka-coordination/testing: the core's test kit from Node, with no
// broker and no sleep. Each case drives the cluster's manual clock (30 s
// leases, the defaults) and finishes in well under a second of wall time.
// A standby's acquire (a promise that waits for the clock) is started, then
// the cluster settles until the member is in the roster.

const test = require('node:test')
const assert = require('node:assert/strict')
const kc = require('..')
const { TestCluster, TestProcess } = require('../testing')

const ROLE = 'billing'

const { ClosingCluster: Cluster } = require('./closing-cluster')
const LEASE = 30
// The challenge stagger (seconds) the crash-failover standbys are given (the
// core's default): rank k challenges at the holder's deadline plus k of them.
const STAGGER = 5
// No case waits on real time; a case that would hang fails after this.
const BOUND = { timeout: 10_000 }

/** `promise` and whether it has settled yet. */
function tracked(promise) {
  const t = { promise, done: false }
  promise.then(
    () => (t.done = true),
    () => (t.done = true),
  )
  return t
}

/** `member` contends on process `p` (with `options` to its
 * `acquireLeadership`); resolves once it is in the roster (waiting for its
 * turn) with its tracked acquire. */
async function standby(cluster, p, member, options) {
  const acquiring = tracked(p.client.acquireLeadership(ROLE, member, options))
  for (let i = 0; i < 100; i++) {
    await cluster.settle()
    if ((await p.client.describeRoleState(ROLE)).members.includes(member)) return acquiring
  }
  throw new Error(`${member} never registered`)
}

/** The guarded writes as `[value text, token text]` pairs. */
const written = (cluster) => cluster.guardedWrites().map((w) => [String(w.value), String(w.token)])

test('the first member leads and renews while time passes', BOUND, async () => {
  const cluster = new Cluster()
  const a = cluster.process('a')
  assert.ok(a instanceof TestProcess)
  assert.ok(a.client instanceof kc.Client)
  const kinds = []
  const start = cluster.now
  const lead = await a.client.acquireLeadership(ROLE, 'a', { onEvent: (e) => kinds.push(e.kind) })
  assert.ok(lead.isHeld)
  assert.equal(lead.lease.grantedAt, start)
  assert.ok((await cluster.describeLeadership(ROLE)).authoritative(lead.token))
  await cluster.advance(120)
  assert.equal(cluster.now, start + 120_000n)
  assert.ok(lead.isHeld)
  assert.ok(lead.lease.deadline > cluster.now, 'the lease was renewed as time passed')
  assert.equal(lead.renewalFailures, 0)
  assert.ok(kinds.includes('renewed'), kinds.join())
  await a.client.close()
})

test('a crashed leader is replaced at its deadline plus the stagger', BOUND, async () => {
  // Rank 0 (b) challenges at a's deadline; rank 1 (c, behind a crashed b)
  // at the deadline plus one stagger.
  await crashFailover(0)
  await crashFailover(1)
})

/** a leads; b, then c, wait (`rank + 1` of them, with the stagger
 * `STAGGER`). Crashing a and the first `rank` standbys leaves the last at
 * challenger rank `rank` (a crashed standby's registration stays): it is not
 * elected 1 ms before a's deadline plus rank × stagger, and is elected
 * exactly then, with a token newer than a's. */
async function crashFailover(rank) {
  const cluster = new Cluster()
  const a = cluster.process('a')
  const leadA = await a.client.acquireLeadership(ROLE, 'a')
  const deadline = leadA.lease.deadline
  const standbys = ['b', 'c'].slice(0, rank + 1).map((m) => cluster.process(m))
  const waits = []
  for (const p of standbys) waits.push(await standby(cluster, p, p.name, { challengeStagger: STAGGER }))
  a.crash()
  assert.equal(a.state, 'crashed')
  for (const p of standbys.slice(0, rank)) p.crash()
  const turn = deadline + BigInt(rank * STAGGER * 1000)
  const wait = waits[rank]
  await cluster.advance(Number(turn - cluster.now - 1n) / 1000)
  assert.equal(wait.done, false, `rank ${rank} must wait until a's deadline plus ${rank} staggers`)
  await cluster.advance(0.001)
  const lead = await wait.promise
  assert.equal(lead.token.compare(leadA.token), 1)
  assert.equal(lead.lease.grantedAt, turn)
  assert.equal(cluster.now, turn)
  assert.ok((await cluster.describeLeadership(ROLE)).authoritative(lead.token))
  a.resume()
  assert.equal(a.state, 'crashed', 'a crash is for good')
}

test('advanceToNextDeadline steps to the challenge', BOUND, async () => {
  const cluster = new Cluster()
  const a = cluster.process('a')
  const b = cluster.process('b')
  const leadA = await a.client.acquireLeadership(ROLE, 'a')
  const waitB = await standby(cluster, b, 'b')
  a.crash()
  for (let steps = 0; !waitB.done && steps < 100; steps++) {
    const at = await cluster.advanceToNextDeadline()
    assert.equal(typeof at, 'bigint')
    assert.ok(at <= leadA.lease.deadline)
  }
  assert.equal((await waitB.promise).lease.grantedAt, leadA.lease.deadline)
  assert.equal(cluster.now, leadA.lease.deadline)
})

test('a paused leader wakes deposed and its write is fenced', BOUND, async () => {
  const cluster = new Cluster()
  const a = cluster.process('a')
  const b = cluster.process('b')
  const leadA = await a.client.acquireLeadership(ROLE, 'a')
  await leadA.write('orders', Buffer.from('a-1'))
  const waitB = await standby(cluster, b, 'b')
  a.pause()
  assert.equal(a.state, 'paused')
  // The write is on its way when the process stops.
  const write = tracked(leadA.write('orders', Buffer.from('a-2')))
  await cluster.advance(40)
  const leadB = await waitB.promise
  await leadB.write('orders', Buffer.from('b-1'), { key: Buffer.from('k') })
  assert.equal(write.done, false, 'a paused process does nothing')
  a.resume()
  await cluster.settle()
  // Never committed: fenced at the cluster, which it reaches before the
  // lease's timer that came due in the pause fires.
  await assert.rejects(write.promise, kc.FencedError)
  assert.equal(leadA.isHeld, false)
  assert.deepEqual(written(cluster), [
    ['a-1', String(leadA.token)],
    ['b-1', String(leadB.token)],
  ])
  const w = cluster.guardedWrites()[1]
  assert.deepEqual([w.topic, w.partition, w.offset, w.role], ['orders', 0, 1n, ROLE])
  assert.ok(Buffer.isBuffer(w.key) && Buffer.isBuffer(w.value))
  assert.equal(w.key.toString(), 'k')
  assert.ok(w.token instanceof kc.FencingToken)
  assert.ok(w.token.equals(leadB.token))
})

test("offsets committed with guarded writes are read back; a deposed leader's move none", BOUND, async () => {
  const cluster = new Cluster()
  const a = cluster.process('a')
  const b = cluster.process('b')
  const group = 'billing-input'
  const at = (offset) => ({ group, offsets: [{ topic: 'orders-in', partition: 0, offset, metadata: `m${offset}` }] })
  const leadA = await a.client.acquireLeadership(ROLE, 'a')
  assert.equal(cluster.committedOffset(group, 'orders-in', 0), null)
  await leadA.writeWithOffsets([{ topic: 'orders', value: Buffer.from('a-1') }], at(1))
  assert.equal(cluster.committedOffset(group, 'orders-in', 0), 1n)
  assert.deepEqual(await leadA.committedOffsets(group, [{ topic: 'orders-in', partitions: [0, 1] }]), [
    { topic: 'orders-in', partition: 0, offset: 1n, metadata: 'm1' },
    { topic: 'orders-in', partition: 1, offset: null, metadata: null },
  ])
  const waitB = await standby(cluster, b, 'b')
  a.pause()
  const write = tracked(leadA.writeWithOffsets([{ topic: 'orders', value: Buffer.from('a-2') }], at(2n)))
  await cluster.advance(40)
  const leadB = await waitB.promise
  a.resume()
  await cluster.settle()
  await assert.rejects(write.promise, kc.FencedError)
  assert.equal(cluster.committedOffset(group, 'orders-in', 0), 1n, 'the deposed write moved nothing')
  assert.deepEqual(await leadB.committedOffsets(group, [{ topic: 'orders-in', partitions: [0] }]), [
    { topic: 'orders-in', partition: 0, offset: 1n, metadata: 'm1' },
  ])
  await leadB.writeWithOffsets([], at(3))
  assert.equal(cluster.committedOffset(group, 'orders-in', 0), 3n)
  assert.deepEqual(written(cluster), [['a-1', String(leadA.token)]])
  assert.throws(() => cluster.committedOffset(group, 'orders-in', 2 ** 31), (e) => e instanceof kc.InvalidArgumentError && e.field === 'partition')
})

test('a resign hands over without waiting for the lease', BOUND, async () => {
  const cluster = new Cluster()
  const a = cluster.process('a')
  const b = cluster.process('b')
  const leadA = await a.client.acquireLeadership(ROLE, 'a')
  const waitB = await standby(cluster, b, 'b')
  const before = cluster.now
  await leadA.resign()
  await cluster.advance(2) // b follows the partition with one-second polls
  const leadB = await waitB.promise
  assert.equal(leadB.token.compare(leadA.token), 1)
  assert.ok(cluster.now - before <= 2_000n)
  assert.ok(leadA.error instanceof kc.ResignedError)
})

test('a leader cut off loses its lease, then healed waits behind the new one', BOUND, async () => {
  const cluster = new Cluster()
  const a = cluster.process('a')
  const b = cluster.process('b')
  const kinds = []
  const leadA = await a.client.acquireLeadership(ROLE, 'a', { onEvent: (e) => kinds.push(e.kind) })
  const waitB = await standby(cluster, b, 'b')
  a.cutOff()
  assert.equal(a.state, 'cutOff')
  await cluster.advance(LEASE + 10)
  assert.equal(leadA.isHeld, false)
  const leadB = await waitB.promise
  a.heal()
  assert.equal(a.state, 'running')
  const again = await standby(cluster, a, 'a')
  await cluster.advance(LEASE + 5) // past the lease b holds (and renews)
  assert.equal(again.done, false)
  assert.ok(leadB.isHeld)
  await leadB.resign()
  await cluster.advance(2)
  assert.equal((await again.promise).token.compare(leadB.token), 1)
  assert.ok(kinds.includes('renewal_failing') && kinds.includes('lease_expired'), kinds.join())
})

test('renewals that fail for a while keep the role', BOUND, async () => {
  const cluster = new Cluster()
  const a = cluster.process('a')
  const kinds = []
  const lead = await a.client.acquireLeadership(ROLE, 'a', { onEvent: (e) => kinds.push(e.kind) })
  a.failFor(15)
  await cluster.advance(40)
  assert.ok(lead.isHeld)
  const failing = kinds.indexOf('renewal_failing')
  assert.ok(failing >= 0 && kinds.indexOf('renewed', failing) > failing, kinds.join())
})

test('an observer sees the failover', BOUND, async () => {
  const cluster = new Cluster()
  const a = cluster.process('a')
  const b = cluster.process('b')
  const o = cluster.process('observer')
  const holders = []
  const observer = o.client.observe(ROLE)
  observer.on('view', (view) => {
    const m = view.leader?.member
    if (m !== undefined && holders.at(-1) !== m) holders.push(m)
  })
  const leadA = await a.client.acquireLeadership(ROLE, 'a')
  const waitB = await standby(cluster, b, 'b')
  a.crash()
  await cluster.advance(LEASE + 5)
  assert.equal((await waitB.promise).token.compare(leadA.token), 1)
  await cluster.settle()
  observer.close()
  assert.deepEqual(holders, ['a', 'b'])
})

test('a leader loop contends again after losing', BOUND, async () => {
  const cluster = new Cluster()
  const a = cluster.process('a')
  const b = cluster.process('b')
  const tokens = []
  const stop = new AbortController()
  const looped = a.client.lead(
    ROLE,
    'a',
    async (leadership, ended) => {
      tokens.push(leadership.token)
      await new Promise((resolve) => ended.addEventListener('abort', resolve, { once: true }))
    },
    { signal: stop.signal },
  )
  for (let i = 0; i < 100 && tokens.length === 0; i++) await cluster.settle()
  assert.equal(tokens.length, 1)
  const waitB = await standby(cluster, b, 'b')
  // Paused past its lease, a is deposed; resumed, it contends again behind b.
  a.pause()
  await cluster.advance(40)
  const leadB = await waitB.promise
  a.resume()
  await cluster.advance(5)
  await leadB.resign()
  await cluster.advance(60)
  assert.equal(tokens.length, 2, tokens.join())
  assert.equal(tokens[0].compare(leadB.token), -1)
  assert.equal(leadB.token.compare(tokens[1]), -1)
  stop.abort()
  await cluster.settle()
  await looped
})

test('a crashed process ends what it had pending with the closed error', BOUND, async () => {
  const cluster = new Cluster()
  const a = cluster.process('a')
  const b = cluster.process('b')
  const c = cluster.process('c')
  const leadA = await a.client.acquireLeadership(ROLE, 'a')
  const deadline = leadA.lease.deadline
  const waitB = await standby(cluster, b, 'b')
  const waitC = await standby(cluster, c, 'c')
  const crashed = (e) => e instanceof kc.InvalidArgumentError && /closed: its process crashed/.test(e.message)
  c.crash()
  await assert.rejects(waitC.promise, crashed)
  a.crash()
  assert.ok(crashed(await leadA.done), 'the term ends with the crash')
  assert.equal(leadA.isHeld, false)
  await assert.rejects(leadA.write('orders', Buffer.from('late')), crashed)
  // Nothing of it reached the cluster: b still waits out a's lease.
  await cluster.advance(Number(deadline - cluster.now - 1n) / 1000)
  assert.equal(waitB.done, false, 'b must wait out a lease')
  await cluster.advance(1)
  assert.equal((await waitB.promise).lease.grantedAt, deadline)
  assert.deepEqual(cluster.guardedWrites(), [])
})

test('a test client answers the Kafka-only operations', BOUND, async () => {
  const c = new Cluster({ partitions: 4 }).process('a').client
  assert.deepEqual([c.partitions, c.stateTopic], [4, '__coordination_state'])
  const report = await c.ensureStateTopic()
  assert.deepEqual([report.created, report.partitions], [false, 4])
  assert.equal((await c.checkStateTopic()).partitions, 4)
  await c.close()
  assert.ok(c.closed)
  await assert.rejects(c.checkStateTopic(), (e) => e instanceof kc.InvalidArgumentError && /closed/.test(e.message))
})

test('bad arguments are refused at the call', BOUND, async () => {
  const cluster = new Cluster()
  assert.throws(() => new TestCluster({ partitions: 0 }), kc.InvalidArgumentError)
  assert.throws(() => new TestCluster({ partition: 4 }), /partitions/)
  await assert.rejects(cluster.advance(-1), (e) => e instanceof kc.InvalidArgumentError && /seconds/.test(e.message))
  await assert.rejects(cluster.advance(), (e) => e instanceof kc.InvalidArgumentError && /seconds/.test(e.message))
  assert.throws(() => cluster.process('a').failFor('5'), /seconds/)
  assert.throws(() => cluster.process(7), /name/)
  assert.equal(await cluster.advanceToNextDeadline(), null, 'nobody waits')
})
