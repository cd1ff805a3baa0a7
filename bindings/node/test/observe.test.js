'use strict'
// The observer on a real Kafka (KRABKA_BOOTSTRAP): a third party that
// watches a role without joining it sees a hand-over and a crash failover
// in order, each new leader with the token describeLeadership reports; a
// standby's `waiting` event names the holder and its token. The member that
// crashes is a separate process killed with SIGKILL. Then the emitter style,
// renewals, the AbortSignal, the consumer-style rule and refused arguments.

const test = require('node:test')
const assert = require('node:assert/strict')
const kc = require('..')
const { kafka, closeShared, uniqueRole, Member, tokenOf } = require('./support')

// A 3 s lease renewed every second, half a second between challenger ranks.
const SHORT = { leaseDuration: 3, renewInterval: 1, challengeStagger: 0.5 }
const MEMBER_ARGS = ['--lease', '3', '--renew', '1', '--stagger', '0.5']

test.after(() => closeShared())

/** The next value of `it` within `ms`, or a failure naming `what`. */
async function nextView(it, what, ms) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no view within ${ms} ms while waiting for ${what}`)), ms)
  })
  try {
    const r = await Promise.race([it.next(), timeout])
    assert.ok(!r.done, `the observer ended while waiting for ${what}`)
    return r.value
  } finally {
    clearTimeout(timer)
  }
}

/** Views until one of `change`; roster changes may come first, any other
 * change fails the test (so the order is asserted). */
async function expectChange(it, change, ms) {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await nextView(it, change, Math.max(1, deadline - Date.now()))
    if (v.change === change) return v
    assert.equal(v.change, 'roster', `expected ${change} next (roster changes aside), got ${describe(v)}`)
  }
}

/** Views until the roster is `members` (rank order); only roster changes
 * may come before. */
async function expectRoster(it, members, ms = 30_000) {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await nextView(it, `the roster ${members}`, Math.max(1, deadline - Date.now()))
    if (JSON.stringify(v.roster.map((e) => e.member)) === JSON.stringify(members)) return v
    assert.equal(v.change, 'roster', `only roster changes before ${members}: ${describe(v)}`)
  }
}

const describe = (v) =>
  `${v.change} leader=${v.leader} lapsed=${v.lapsed} roster=${JSON.stringify(v.roster.map((e) => e.member))} at ${v.position}`

/** The first event `acquireLeadership`'s onEvent gets of `kind`. */
function firstEvent(kind) {
  const seen = []
  let resolve
  const found = new Promise((r) => (resolve = r))
  const onEvent = (e) => {
    seen.push(e.kind)
    if (e.kind === kind) resolve(e)
  }
  return { onEvent, found, seen }
}

async function within(promise, ms, what) {
  let timer
  try {
    return await Promise.race([
      promise,
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms))),
    ])
  } finally {
    clearTimeout(timer)
  }
}

test('an observer sees a hand-over and a crash failover in order, with the coordinator\'s tokens', async () => {
  const { settings, client } = await kafka()
  const role = uniqueRole('observe')
  const observer = client.observe(role)
  assert.ok(observer instanceof kc.Observer)
  assert.deepEqual(observer.roles, [role])
  let closeEvents = 0
  observer.on('close', () => closeEvents++)
  const it = observer[Symbol.asyncIterator]()
  const ca = new kc.Client(settings)
  const cc = new kc.Client(settings)
  let b
  try {
    const initial = await nextView(it, 'the initial view', 20_000)
    assert.equal(initial.change, 'initial')
    assert.equal(initial.role, role)
    assert.equal(initial.partition, kc.rolePartition(role, 16))
    assert.equal(initial.leader, null)
    assert.equal(initial.lapsed, null)
    assert.deepEqual(initial.roster, [])
    assert.equal(typeof initial.position, 'bigint')
    assert.equal(typeof initial.at, 'bigint')

    // a leads, in this process.
    const a = await ca.acquireLeadership(role, 'a', SHORT)
    const electedA = await expectChange(it, 'elected', 10_000)
    assert.ok(electedA.leader instanceof kc.Lease)
    assert.equal(electedA.leader.member, 'a')
    assert.ok(electedA.leader.token.equals(a.token), `${electedA.leader.token} vs ${a.token}`)
    assert.ok((await client.describeLeadership(role)).token.equals(electedA.leader.token))

    // b, another process, waits behind a.
    b = new Member(role, 'b', ...MEMBER_ARGS)
    const joined = await expectRoster(it, ['a', 'b'])
    assert.equal(joined.leader.member, 'a')
    assert.deepEqual(joined.roster.map((e) => e.rank), [0, 1])
    assert.equal(typeof joined.roster[1].offset, 'bigint')

    // The hand-over: a resigns, b is elected.
    await a.resign()
    const cleared = await expectChange(it, 'cleared', 10_000)
    assert.equal(cleared.leader, null)
    const bElected = await b.expect('elected', 30_000)
    const tokenB = tokenOf(bElected)
    const electedB = await expectChange(it, 'elected', 10_000)
    assert.equal(electedB.leader.member, 'b')
    assert.ok(electedB.leader.token.equals(tokenB), `${electedB.leader.token} vs ${tokenB}`)
    assert.equal(tokenB.compare(a.token), 1)
    assert.ok((await client.describeLeadership(role)).token.equals(electedB.leader.token))

    // c waits behind b: its waiting event names b and b's token.
    const waiting = firstEvent('waiting')
    const acquiringC = cc.acquireLeadership(role, 'c', { ...SHORT, onEvent: waiting.onEvent })
    const w = await within(waiting.found, 20_000, `c's waiting event (events: ${waiting.seen})`)
    assert.equal(w.member, 'c')
    assert.equal(w.holder, 'b', JSON.stringify(w, (_, v) => (typeof v === 'bigint' ? `${v}` : v)))
    assert.ok(w.token instanceof kc.FencingToken && w.token.equals(tokenB), `${w.token} vs ${tokenB}`)
    assert.deepEqual(waiting.seen.slice(0, 1), ['registered'])
    await expectRoster(it, ['b', 'c'])

    // The crash: b is killed; its lease lapses, then c is elected.
    b.kill('SIGKILL')
    assert.equal((await b.exited).signal, 'SIGKILL')
    const lapsed = await expectChange(it, 'lapsed', (SHORT.leaseDuration + 10) * 1000)
    assert.equal(lapsed.leader, null)
    assert.equal(lapsed.lapsed.member, 'b')
    assert.ok(lapsed.lapsed.token.equals(tokenB))
    assert.ok(lapsed.at >= lapsed.lapsed.deadline, 'a lapse is reported at the deadline, not before')
    const electedC = await expectChange(it, 'elected', 20_000)
    const c = await acquiringC
    assert.equal(electedC.leader.member, 'c')
    assert.ok(electedC.leader.token.equals(c.token), `${electedC.leader.token} vs ${c.token}`)
    assert.equal(c.token.compare(tokenB), 1)
    const status = await client.describeLeadership(role)
    assert.ok(status.token.equals(electedC.leader.token) && status.authoritative(c.token))
    await c.resign()
    await expectChange(it, 'cleared', 10_000)

    // A break (the iterator's return) closes the observer.
    await it.return()
    assert.equal(observer.closed, true)
    assert.deepEqual(await it.next(), { done: true, value: undefined })
    await new Promise((r) => setImmediate(r))
    assert.equal(closeEvents, 1)
  } finally {
    observer.close()
    b?.kill()
    ca.close()
    cc.close()
  }
})

test('as an EventEmitter: views as events from the first listener on, then close; renewals on request', async () => {
  const { settings, client } = await kafka()
  const role = uniqueRole('observe-emitter')
  const observer = client.observe([role, role], { renewals: true })
  assert.deepEqual(observer.roles, [role], 'each role once')
  const views = []
  const waiters = []
  observer.on('view', (v) => {
    views.push(v)
    for (const w of waiters.splice(0)) w()
  })
  const closed = new Promise((r) => observer.once('close', r))
  const until = async (probe, what) => {
    const deadline = Date.now() + 20_000
    while (!probe()) {
      assert.ok(Date.now() < deadline, `timed out waiting for ${what}; views: ${views.map(describe).join('; ')}`)
      await new Promise((r) => {
        waiters.push(r)
        setTimeout(r, 200)
      })
    }
  }
  // Mixing styles is refused.
  assert.throws(() => observer[Symbol.asyncIterator](), { code: 'ERR_OBSERVER_CONSUMER' })
  const own = new kc.Client(settings)
  try {
    await until(() => views.length >= 1, 'the initial view')
    assert.equal(views[0].change, 'initial')
    const a = await own.acquireLeadership(role, 'a', SHORT)
    await until(() => views.some((v) => v.change === 'elected'), 'the election')
    const elected = views.find((v) => v.change === 'elected')
    assert.ok(elected.leader.token.equals(a.token))
    assert.ok((await client.describeLeadership(role)).token.equals(elected.leader.token))
    await until(() => views.some((v) => v.change === 'renewed'), 'a renewal')
    const renewed = views.find((v) => v.change === 'renewed')
    assert.ok(renewed.leader.token.equals(a.token))
    assert.ok(renewed.leader.deadline > elected.leader.deadline)
    await a.resign()
    await until(() => views.some((v) => v.change === 'cleared'), 'the resign')
    const order = views.map((v) => v.change).filter((c) => c !== 'roster' && c !== 'renewed')
    assert.deepEqual(order, ['initial', 'elected', 'cleared'])
    observer.close()
    await within(closed, 5_000, "the 'close' event")
    assert.equal(observer.closed, true)
  } finally {
    observer.close()
    own.close()
  }
})

test('an AbortSignal closes the observer; so does Symbol.asyncDispose', async () => {
  const { client } = await kafka()
  const role = uniqueRole('observe-abort')
  const controller = new AbortController()
  const observer = client.observe(role, { signal: controller.signal })
  const seen = []
  const loop = (async () => {
    for await (const v of observer) {
      seen.push(v.change)
      if (seen.length === 1) controller.abort()
    }
  })()
  await within(loop, 20_000, 'the loop to end after the abort')
  assert.deepEqual(seen, ['initial'])
  assert.equal(observer.closed, true)

  // A signal aborted already: closed at once, nothing read.
  const dead = client.observe(role, { signal: AbortSignal.abort() })
  assert.equal(dead.closed, true)
  const closed = new Promise((r) => dead.once('close', r))
  for await (const v of dead) assert.fail(`a view from a closed observer: ${describe(v)}`)
  await within(closed, 5_000, "the 'close' event")

  // Symbol.asyncDispose (what `await using` calls) closes it; a pending
  // read then ends.
  const disposed = client.observe(role)
  const it = disposed[Symbol.asyncIterator]()
  assert.equal((await nextView(it, 'the initial view', 20_000)).change, 'initial')
  const pending = it.next()
  await disposed[Symbol.asyncDispose]()
  assert.deepEqual(await within(pending, 5_000, 'the pending read to end'), { done: true, value: undefined })
  assert.equal(disposed.closed, true)
  // The other style on an iterated observer is refused.
  assert.throws(() => disposed.on('view', () => {}), { code: 'ERR_OBSERVER_CONSUMER' })
  assert.throws(() => disposed[Symbol.asyncIterator](), { code: 'ERR_OBSERVER_CONSUMER' })
})

test('observe refuses bad arguments at the call, naming the problem', async () => {
  const { client } = await kafka()
  assert.throws(() => client.observe([]), (e) => {
    assert.ok(e instanceof kc.InvalidArgumentError, `${e}`)
    assert.equal(e.code, 'INVALID_ARGUMENT')
    assert.match(e.message, /at least one role/)
    return true
  })
  assert.throws(() => client.observe(['ok', 'a\0b']), (e) => {
    assert.ok(e instanceof kc.InvalidArgumentError, `${e}`)
    assert.match(e.message, /NUL/)
    return true
  })
  assert.throws(() => client.observe(''), (e) => e instanceof kc.InvalidArgumentError && /empty/.test(e.message))
  for (const [roles, options, field] of [
    [undefined, undefined, 'roles'],
    [42, undefined, 'roles'],
    [['r', 7], undefined, 'role'],
    ['r', 'renewals', 'options'],
    ['r', { renewals: 'yes' }, 'renewals'],
    ['r', { signal: {} }, 'signal'],
  ]) {
    assert.throws(
      () => client.observe(roles, options),
      (e) => {
        assert.ok(e instanceof kc.InvalidArgumentError, `${e}`)
        assert.equal(e.code, 'INVALID_ARGUMENT')
        assert.equal(e.field, field, e.message)
        return true
      },
      `observe(${JSON.stringify(roles)}, ${JSON.stringify(options)})`,
    )
  }
  await assert.rejects(client.acquireLeadership('r', 'm', { onEvent: 'no' }), (e) => e instanceof kc.InvalidArgumentError && e.field === 'onEvent')
  const closed = new kc.Client({ 'bootstrap.servers': '127.0.0.1:1' })
  closed.close()
  assert.throws(() => closed.observe('r'), (e) => e instanceof kc.InvalidArgumentError && /closed/.test(e.message))
})

test('an observer on a missing state topic rejects as the acquire does, naming the Node call', async () => {
  const { settings } = await kafka()
  const client = new kc.Client(settings, { partitions: 4, stateTopic: uniqueRole('observe-missing') })
  try {
    const observer = client.observe(['billing'])
    const e = await (async () => {
      for await (const view of observer) assert.fail(`a view of a state topic that does not exist: ${view}`)
    })().then(
      () => assert.fail('the observer ended without an error'),
      (e) => e,
    )
    assert.ok(e instanceof kc.FatalError, String(e))
    assert.match(e.message, /does not exist/)
    assert.match(e.message, /with client\.ensureStateTopic\(\) /)
    assert.match(e.message, /--partitions 4 /)
  } finally {
    client.close()
  }
})
