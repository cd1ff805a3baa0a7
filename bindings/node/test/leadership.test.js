'use strict'
// Leadership on a real Kafka (KRABKA_BOOTSTRAP; unset or unreachable fails
// every test here, loudly): one process's acquire, describe, events and
// resign; an aborted acquire; failover between two Node processes after
// SIGKILL; a deposed process's guarded write refused by the broker; and a
// process that exits by itself once its leadership ended and its client is
// closed.

const test = require('node:test')
const assert = require('node:assert/strict')
const kc = require('..')
const { FAST, kafka, closeShared, uniqueRole, dataTopic, mintNewerEpoch, members, waitUntil, Member, tokenOf } = require('./support')

const TOPIC = 'krabka-node-guarded'

test.after(() => closeShared())

test('the test cluster is reachable (KRABKA_BOOTSTRAP)', async () => {
  const { client } = await kafka()
  const report = await client.checkStateTopic()
  assert.equal(report.cleanupPolicy, 'compact')
  assert.equal(report.partitions, 16)
})

test('a missing state topic names the Node call that creates it', async () => {
  const { settings } = await kafka()
  const client = new kc.Client(settings, { partitions: 2, stateTopic: uniqueRole('missing-state') })
  try {
    const e = await client.checkStateTopic().then(
      () => assert.fail('a state topic that does not exist passed the check'),
      (e) => e,
    )
    assert.ok(e instanceof kc.KrabkaError, String(e))
    assert.match(e.message, /with client\.ensureStateTopic\(\) \(client\.ensureStateTopic\(\{ development: true \}\) on a single broker\)/)
    assert.doesNotMatch(e.message, /::|TopicSpec|ensure_state_topic/)
  } finally {
    client.close()
  }
})

test('acquire, describe, events and resign, without blocking the event loop', async () => {
  const { settings, client } = await kafka()
  const role = uniqueRole('one-process')
  // The event loop keeps turning while the core works.
  let lag = 0
  let last = Date.now()
  const ticker = setInterval(() => {
    const now = Date.now()
    lag = Math.max(lag, now - last - 10)
    last = now
  }, 10)
  const own = new kc.Client(settings)
  try {
    const l = await own.acquireLeadership(role, 'a', FAST)
    assert.ok(l instanceof kc.Leadership)
    assert.ok(l.isHeld)
    assert.equal(l.error, null)
    assert.equal(l.role, role)
    assert.equal(l.member, 'a')
    assert.equal(typeof l.token.producerId, 'bigint')
    assert.equal(l.lease.member, 'a')
    assert.ok(l.leaseLeft > 0 && l.leaseLeft <= FAST.leaseDuration)

    const status = await client.describeLeadership(role)
    assert.ok(status.authoritative(l.token))
    assert.ok(status.token.equals(l.token))
    assert.ok(!status.authoritative(kc.NO_EPOCH))
    const report = await client.describeRoleState(role)
    assert.deepEqual(report.members, ['a'])
    assert.equal(report.roster[0].rank, 0)
    assert.equal(typeof report.roster[0].offset, 'bigint')
    assert.ok(report.lease.token.equals(l.token))
    assert.equal(report.partition, kc.rolePartition(role, 16))

    // Both event views: the emitter and an async iterator.
    const renewed = new Promise((resolve) => l.once('renewed', resolve))
    const ended = new Promise((resolve) => l.once('end', resolve))
    const kinds = []
    const iterated = (async () => {
      for await (const e of l) kinds.push(e.kind)
    })()
    const first = await renewed
    assert.equal(first.kind, 'renewed')
    assert.equal(typeof first.deadline, 'bigint')
    assert.equal(typeof first.at, 'bigint')

    await l.resign()
    const reason = await l.done
    assert.ok(reason instanceof kc.ResignedError, `${reason}`)
    assert.equal(reason.code, 'RESIGNED')
    assert.equal(l.error, reason)
    assert.equal(l.isHeld, false)
    assert.equal(await ended, reason)
    await iterated
    assert.deepEqual(kinds.slice(-2), ['resigned', 'deregistered'])
    assert.ok(!(await client.describeLeadership(role)).authoritative(l.token))
    assert.deepEqual(await members(role), [])
    await assert.rejects(l.write(TOPIC, Buffer.from('late')), (e) => e instanceof kc.ResignedError || e.code === 'RESIGNED')
  } finally {
    clearInterval(ticker)
    own.close()
  }
  assert.ok(lag < 250, `the event loop stalled for ${lag} ms`)
})

test('an aborted acquire leaves no registration behind', async () => {
  const { settings } = await kafka()
  const role = uniqueRole('abort')
  const holder = new kc.Client(settings)
  const waiter = new kc.Client(settings)
  try {
    const a = await holder.acquireLeadership(role, 'a', FAST)
    const controller = new AbortController()
    const pending = waiter.acquireLeadership(role, 'b', { ...FAST, signal: controller.signal })
    await waitUntil(async () => JSON.stringify(await members(role)) === '["a","b"]', 20_000, 'b to register behind a')
    controller.abort()
    await assert.rejects(pending, (e) => e instanceof kc.CancelledError && e.code === 'CANCELLED')
    assert.deepEqual(await members(role), ['a'], 'the aborted member is deregistered')

    // An already aborted signal: nothing is registered at all.
    await assert.rejects(
      waiter.acquireLeadership(role, 'c', { ...FAST, signal: AbortSignal.abort() }),
      (e) => e instanceof kc.CancelledError,
    )
    assert.deepEqual(await members(role), ['a'])
    assert.ok(a.isHeld)
    await a.resign()
  } finally {
    holder.close()
    waiter.close()
  }
})

test('SIGKILL of the leader process hands the role to the standby process', async () => {
  await kafka()
  const topic = await dataTopic(TOPIC)
  const role = uniqueRole('failover')
  const a = new Member(role, 'a', '--topic', topic)
  let b
  try {
    const electedA = await a.expect('elected', 30_000)
    await a.expect('wrote', 10_000)
    b = new Member(role, 'b', '--topic', topic)
    await waitUntil(async () => JSON.stringify(await members(role)) === '["a","b"]', 30_000, 'b to register behind a')
    const { client } = await kafka()
    assert.ok((await client.describeLeadership(role)).authoritative(tokenOf(electedA)))

    a.kill('SIGKILL')
    const killed = await a.exited
    assert.equal(killed.signal, 'SIGKILL')

    const electedB = await b.expect('elected', (FAST.leaseDuration + FAST.challengeStagger + 10) * 1000)
    const took = (electedB.rx - killed.at) / 1000
    assert.ok(took <= FAST.leaseDuration + FAST.challengeStagger + 4, `takeover took ${took} s`)
    await b.expect('wrote', 10_000)
    const tokenA = tokenOf(electedA)
    const tokenB = tokenOf(electedB)
    assert.equal(tokenB.compare(tokenA), 1)
    const status = await client.describeLeadership(role)
    assert.ok(status.authoritative(tokenB) && !status.authoritative(tokenA))
    await waitUntil(async () => JSON.stringify(await members(role)) === '["b"]', 15_000, "the dead holder's registration to be removed")
    console.log(`takeover after SIGKILL: ${took.toFixed(2)} s (lease ${FAST.leaseDuration} s, stagger ${FAST.challengeStagger} s)`)

    b.send('resign')
    const endedB = await b.expect('ended', 20_000)
    assert.equal(endedB.code, 'RESIGNED')
    assert.equal((await b.exited).code, 0)
  } finally {
    a.kill()
    b?.kill()
  }
})

test("a deposed process's guarded write rejects with a fenced error", async () => {
  await kafka()
  const topic = await dataTopic(TOPIC)
  const role = uniqueRole('fenced')
  // A 30 s lease renewed every 10 s: no renewal meets the newer epoch
  // first; the guarded write does.
  const a = new Member(role, 'a', '--topic', topic, '--lease', '30', '--renew', '10', '--write-every', '0')
  try {
    await a.expect('elected', 30_000)
    a.send('write')
    await a.expect('wrote', 10_000)
    await mintNewerEpoch(role)
    const { client } = await kafka()
    const electedToken = tokenOf(a.seen.find((e) => e.event === 'elected'))
    assert.ok(!(await client.describeLeadership(role)).authoritative(electedToken))

    const from = a.seen.length
    a.send('write')
    const failed = await a.expect('write_failed', 20_000, from)
    assert.equal(failed.code, 'FENCED', JSON.stringify(failed))
    assert.equal(failed.name, 'FencedError')
    assert.equal(failed.held, false, 'the fence ended the term')
    const ended = await a.expect('ended', 10_000)
    assert.equal(ended.code, 'FENCED')
    assert.equal((await a.exited).code, 0)
    // The term is over: the old token is not authoritative.
    assert.ok(!(await client.describeLeadership(role)).authoritative(electedToken))
  } finally {
    a.kill()
  }
})

test('a process whose leadership ended and whose client is closed exits by itself', async () => {
  await kafka()
  const role = uniqueRole('exits')
  const a = new Member(role, 'a', '--exit-after-resign')
  try {
    await a.expect('elected', 30_000)
    const resigned = await a.expect('resigned', 20_000)
    assert.equal(resigned.code, 'RESIGNED')
    const exit = await Promise.race([a.exited, new Promise((r) => setTimeout(() => r(null), 15_000))])
    assert.ok(exit !== null, `the process did not exit by itself; events: ${JSON.stringify(a.seen.map((e) => e.event))}`)
    assert.equal(exit.code, 0)
    assert.ok(a.seen.some((e) => e.event === 'exited'))
    assert.deepEqual(await members(role), [])
  } finally {
    a.kill()
  }
})

test('an unreachable cluster rejects within the connect timeout, naming the address', async () => {
  const client = new kc.Client({ 'bootstrap.servers': '127.0.0.1:1' }, { connectTimeout: 1 })
  try {
    const started = Date.now()
    await assert.rejects(client.acquireLeadership('r', 'm'), (e) => {
      assert.ok(e instanceof kc.TransientError, `${e}`)
      assert.match(e.message, /127\.0\.0\.1:1/)
      return true
    })
    assert.ok(Date.now() - started < 10_000)
  } finally {
    client.close()
  }
})
