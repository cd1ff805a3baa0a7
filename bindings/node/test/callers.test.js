'use strict'
// What a caller of the package sees: every error a KrabkaError with
// `retryable` and a stack at the caller's line, unknown option keys refused
// with the nearest known name, an abort's reason kept as `cause`, the wire
// form of tokens (toString, toJSON, parse, authoritative), Date-friendly
// times, statuses that print their fields, and call order after resign()
// (on the real Kafka of KRABKA_BOOTSTRAP).

const test = require('node:test')
const assert = require('node:assert/strict')
const util = require('node:util')
const kc = require('..')
const { FAST, kafka, closeShared, uniqueRole, dataTopic } = require('./support')

const TOPIC = 'krabka-node-guarded'

test.after(() => closeShared())

const offline = () => new kc.Client({ 'bootstrap.servers': '127.0.0.1:1' })

test('every error has retryable; argument refusals are InvalidArgumentErrors with field', async () => {
  assert.throws(() => kc.Key.lease(5), (e) => {
    assert.ok(e instanceof kc.InvalidArgumentError && e instanceof kc.KrabkaError, `${e}`)
    assert.ok(!(e instanceof TypeError))
    assert.equal(e.retryable, false)
    assert.equal(e.field, 'role')
    return true
  })
  for (const [variant, retryable] of [['transient', true], ['fenced', false], ['cancelled', false]]) {
    assert.throws(() => kc._throwCoreError(variant, 'why'), (e) => e.retryable === retryable)
  }
  assert.throws(() => kc.rolePartition('', 16), { code: 'INVALID_ARGUMENT', field: 'role', retryable: false })
  assert.throws(() => kc.rolePartition('r', 0), { field: 'partitions' })
  const client = offline()
  try {
    await assert.rejects(client.acquireLeadership('r', 'm', { leaseDuration: 0 }), { field: 'lease_duration', retryable: false })
    await assert.rejects(client.acquireLeadership('', 'm'), { code: 'INVALID_ARGUMENT', field: 'role' })
    // How two timings relate is no one argument's.
    await assert.rejects(client.acquireLeadership('r', 'm', { leaseDuration: 3 }), (e) => e.code === 'INVALID_ARGUMENT' && e.field === undefined)
  } finally {
    client.close()
  }
})

test('stacks point at the caller, not at the package', async () => {
  const here = __filename
  const ownFrames = (e) => e.stack.split('\n').filter((l) => /^\s+at /.test(l) && /bindings[/\\]node[/\\](lib|index)/.test(l))
  try {
    kc.Key.lease(5)
    assert.fail('no throw')
  } catch (e) {
    assert.deepEqual(ownFrames(e), [], e.stack)
    assert.ok(e.stack.split('\n')[1].includes(here), e.stack)
  }
  const client = offline()
  try {
    const e = await client.describeLeadership(null).catch((x) => x)
    assert.ok(e instanceof kc.InvalidArgumentError, `${e}`)
    assert.deepEqual(ownFrames(e), [], e.stack)
    assert.ok(e.stack.split('\n')[1].includes(here), e.stack)
    const fromLead = await client.lead('', 'm', async () => {}).catch((x) => x)
    assert.ok(fromLead instanceof kc.InvalidArgumentError, `${fromLead}`)
    assert.ok(fromLead.stack.split('\n')[1].includes(here), fromLead.stack)
  } finally {
    client.close()
  }
})

test('unknown option keys are refused, naming the nearest known one', async () => {
  const client = offline()
  try {
    await assert.rejects(client.acquireLeadership('r', 'm', { renew_interval: 1 }), (e) => {
      assert.ok(e instanceof kc.InvalidArgumentError, `${e}`)
      assert.equal(e.field, 'renew_interval')
      assert.match(e.message, /unknown option "renew_interval" of acquireLeadership\(\): did you mean "renewInterval"\?/)
      return true
    })
    await assert.rejects(client.acquireLeadership('r', 'm', { lease: 5 }), /unknown option "lease" .*leaseDuration/)
    await assert.rejects(client.describeRoleState('r', { signl: undefined }), /did you mean "signal"/)
    await assert.rejects(client.ensureStateTopic({ replicationFactr: 3 }), /did you mean "replicationFactor"/)
    assert.throws(() => client.observe('r', { renewal: true }), /did you mean "renewals"/)
    await assert.rejects(client.lead('r', 'm', async () => {}, { leaseDurations: 5 }), /did you mean "leaseDuration"/)
  } finally {
    client.close()
  }
  assert.throws(() => new kc.Client({ 'bootstrap.servers': '127.0.0.1:1' }, { conectTimeout: 1 }), /did you mean "connectTimeout"/)
})

test('tokens have one wire form: String, JSON, parse; times convert to Date', () => {
  const t = new kc.FencingToken(1004n, 18)
  assert.equal(String(t), '1004/18')
  assert.equal(`${t}`, '1004/18')
  assert.equal(JSON.stringify({ token: t }), '{"token":"1004/18"}')
  assert.ok(kc.FencingToken.parse('1004/18').equals(t))
  assert.ok(kc.FencingToken.parse(String(kc.NO_EPOCH)).isNoEpoch)
  assert.ok(kc.FencingToken.parse('1004/18') instanceof kc.FencingToken)
  assert.throws(() => kc.FencingToken.parse('1004:18'), (e) => e instanceof kc.InvalidArgumentError && e.field === 'text' && /1004:18/.test(e.message))
  assert.throws(() => kc.FencingToken.parse(7), { code: 'INVALID_ARGUMENT', field: 'text' })
  assert.equal(util.inspect(t), 'FencingToken(1004/18)')
  assert.equal(kc.toDate(1700000030000n).toISOString(), '2023-11-14T22:13:50.000Z')
  assert.equal(kc.toDate(1700000030000).getTime(), 1700000030000)
  assert.throws(() => kc.toDate(2n ** 62n), { code: 'INVALID_ARGUMENT', field: 'epoch_ms' })
  assert.throws(() => kc.toDate('soon'), { code: 'INVALID_ARGUMENT', field: 'epoch_ms' })
})

test('an aborted acquire keeps the signal reason as cause; a timeout is told apart', async () => {
  const { settings } = await kafka()
  const client = new kc.Client(settings)
  try {
    await assert.rejects(client.acquireLeadership(uniqueRole('abort-why'), 'm', { signal: AbortSignal.abort('shutting down') }), (e) => {
      assert.ok(e instanceof kc.CancelledError, `${e}`)
      assert.equal(e.cause, 'shutting down')
      return true
    })
    // A holder, so the second member waits until its timeout signal fires.
    const role = uniqueRole('abort-timeout')
    const held = await (await kafka()).client.acquireLeadership(role, 'holder', FAST)
    await assert.rejects(client.acquireLeadership(role, 'standby', { ...FAST, signal: AbortSignal.timeout(300) }), (e) => {
      assert.ok(e instanceof kc.CancelledError, `${e}`)
      assert.equal(e.cause?.name, 'TimeoutError')
      return true
    })
    await held.resign()
  } finally {
    client.close()
  }
})

test('a status prints its token and accepts the token text', async () => {
  const { client } = await kafka()
  const role = uniqueRole('status-text')
  const l = await client.acquireLeadership(role, 'a', FAST)
  try {
    const status = await client.describeLeadership(role)
    assert.ok(status.authoritative(String(l.token)))
    assert.ok(status.authoritative(JSON.parse(JSON.stringify(l.token))))
    assert.ok(!status.authoritative('NoEpoch'))
    assert.throws(() => status.authoritative('a/b'), { code: 'INVALID_ARGUMENT', field: 'token' })
    assert.throws(() => status.authoritative(5), { code: 'INVALID_ARGUMENT', field: 'token' })
    assert.match(util.inspect(status), new RegExp(`LeadershipStatus \\{ token: FencingToken\\(${l.token}\\) \\}`))
    assert.ok(kc.toDate(l.lease.deadline).getTime() > Date.now())
  } finally {
    await l.resign()
  }
})

test('a write called after resign() never commits (un-awaited w1, resign, w2; many runs)', async () => {
  const { settings } = await kafka()
  const topic = await dataTopic(TOPIC)
  const client = new kc.Client(settings)
  try {
    const RUNS = 20
    for (let i = 0; i < RUNS; i++) {
      const role = uniqueRole(`order-${i}`)
      const l = await client.acquireLeadership(role, 'a', FAST)
      const w1 = l.write(topic, Buffer.from(`${role} w1`))
      const r = l.resign()
      const w2 = l.write(topic, Buffer.from(`${role} w2`))
      const [s1, sr, s2] = await Promise.allSettled([w1, r, w2])
      assert.equal(sr.status, 'fulfilled', `run ${i}: resign ${sr.reason}`)
      assert.equal(s2.status, 'rejected', `run ${i}: the write after resign() committed`)
      assert.ok(s2.reason instanceof kc.ResignedError, `run ${i}: ${s2.reason}`)
      assert.ok(s1.status === 'fulfilled' || s1.reason instanceof kc.ResignedError, `run ${i}: ${s1.reason}`)
    }
  } finally {
    client.close()
  }
})
