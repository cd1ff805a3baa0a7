'use strict'
// AbortSignal on every operation that waits on the cluster, and
// Symbol.asyncDispose of Leadership and Client (called directly: Node 20
// cannot parse `await using`), on a real Kafka. An aborted signal rejects
// with a CancelledError whose cause is the signal's reason, and leaves
// nothing half done: a signal aborted at the call sends nothing (the
// client's DescribeTransactions count, the data topic's end offset and the
// roster show it); a read aborted while it waits rejects at once; a guarded
// write aborted while under way is not cut in half (it commits, and the
// promise resolves); a resign aborted while under way still ends the term.

const test = require('node:test')
const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
const path = require('node:path')
const kc = require('..')
const { FAST, kafka, closeShared, uniqueRole, dataTopic, members, bootstrap } = require('./support')

const TOPIC = 'krabka-node-signals'
const KAFKA_SH = process.env.KRABKA_KAFKA_SH ?? path.resolve(__dirname, '../../../ci/kafka.sh')

test.after(() => closeShared())

/** The end offset of the one partition of `topic` (Kafka's own tool). */
function endOffset(topic) {
  return new Promise((resolve, reject) => {
    execFile('bash', [KAFKA_SH, 'tool', 'get-offsets', '--bootstrap-server', bootstrap(), '--topic', topic], { timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`get-offsets failed: ${stderr}`, { cause: err }))
      const m = /:0:(\d+)\s*$/.exec(stdout.trim())
      if (!m) return reject(new Error(`get-offsets printed ${stdout}`))
      resolve(Number(m[1]))
    })
  })
}

function isAbort(reason, what) {
  return (e) => {
    assert.ok(e instanceof kc.CancelledError, `${e}`)
    assert.equal(e.code, 'CANCELLED')
    assert.equal(e.cause, reason)
    assert.match(e.message, new RegExp(`^${what} was aborted`))
    return true
  }
}

test('an already aborted signal rejects every read and ensureStateTopic before anything is sent', async () => {
  const { settings } = await kafka()
  const client = new kc.Client(settings)
  try {
    const reason = new Error('shutting down')
    const signal = AbortSignal.abort(reason)
    await assert.rejects(client.describeLeadership('r', { signal }), isAbort(reason, 'describeLeadership'))
    assert.equal(client._describeRequests(), 0, 'a DescribeTransactions request was sent')
    await assert.rejects(client.describeRoleState('r', { signal }), isAbort(reason, 'describeRoleState'))
    await assert.rejects(client.checkStateTopic({ signal }), isAbort(reason, 'checkStateTopic'))
    await assert.rejects(client.ensureStateTopic({ development: true, signal }), isAbort(reason, 'ensureStateTopic'))
    // The same client works without the signal.
    assert.ok(!(await client.describeLeadership(uniqueRole('after-abort'))).authoritative(kc.NO_EPOCH))
    assert.ok(client._describeRequests() > 0)
  } finally {
    client.close()
  }
})

test('a read aborted while it waits on the cluster rejects at once', async () => {
  // Nothing listens there: each read waits 3 s or more (the timeouts)
  // before it fails; the aborted reads end so in the background.
  const client = new kc.Client({ 'bootstrap.servers': '127.0.0.1:1' }, { connectTimeout: 4, operationTimeout: 3 })
  try {
    for (const [what, start] of [
      ['describeLeadership', (signal) => client.describeLeadership('r', { signal })],
      ['describeRoleState', (signal) => client.describeRoleState('r', { signal })],
      ['checkStateTopic', (signal) => client.checkStateTopic({ signal })],
    ]) {
      const stop = new AbortController()
      const reason = new Error(`stop ${what}`)
      const started = Date.now()
      const pending = start(stop.signal)
      stop.abort(reason)
      await assert.rejects(pending, isAbort(reason, what))
      assert.ok(Date.now() - started < 2000, `${what} took ${Date.now() - started} ms to reject`)
    }
  } finally {
    client.close()
  }
})

test('a signal must be an AbortSignal', async () => {
  const { client } = await kafka()
  await assert.rejects(client.describeLeadership('r', { signal: 5 }), { name: 'InvalidArgumentError', code: 'INVALID_ARGUMENT', field: 'signal' })
  await assert.rejects(client.checkStateTopic('now'), { name: 'InvalidArgumentError', field: 'options' })
})

test('a guarded write is never cut in half by its signal', async () => {
  const { settings } = await kafka()
  const topic = await dataTopic(TOPIC)
  const client = new kc.Client(settings)
  try {
    const l = await client.acquireLeadership(uniqueRole('write-signal'), 'a', FAST)
    const before = await endOffset(topic)
    // Aborted at the call: nothing is written, and the term goes on.
    const reason = new Error('too late')
    await assert.rejects(l.write(topic, Buffer.from('never'), { signal: AbortSignal.abort(reason) }), isAbort(reason, 'the guarded write'))
    await assert.rejects(l.writeRecords([{ topic, value: Buffer.from('never') }], { signal: AbortSignal.abort(reason) }), isAbort(reason, 'the guarded write'))
    assert.ok(l.isHeld)
    assert.equal(await endOffset(topic), before, 'an aborted write wrote something')
    // Aborted while under way: the transaction runs to its end and the
    // promise settles with its outcome.
    const stop = new AbortController()
    const writing = l.write(topic, Buffer.from('whole'), { signal: stop.signal })
    stop.abort(new Error('abort mid-write'))
    await writing
    // The record and the transaction's commit marker.
    assert.equal(await endOffset(topic), before + 2)
    await l.resign()
  } finally {
    client.close()
  }
})

test('a resign aborted while under way still ends the term; one aborted at the call resigns nothing', async () => {
  const { settings } = await kafka()
  const client = new kc.Client(settings)
  const role = uniqueRole('resign-signal')
  try {
    const l = await client.acquireLeadership(role, 'a', FAST)
    const reason = new Error('no time')
    await assert.rejects(l.resign({ signal: AbortSignal.abort(reason) }), isAbort(reason, 'resign'))
    assert.ok(l.isHeld, 'a resign aborted at the call ended the term')
    assert.deepEqual(await members(role), ['a'])

    const stop = new AbortController()
    const resigning = l.resign({ signal: stop.signal })
    stop.abort(reason)
    await assert.rejects(resigning, isAbort(reason, 'resign'))
    assert.ok((await l.done) instanceof kc.ResignedError)
    assert.deepEqual(await members(role), [])
  } finally {
    client.close()
  }
})

test('Symbol.asyncDispose resigns a held leadership and closes a client', async () => {
  const { settings } = await kafka()
  const client = new kc.Client(settings)
  const role = uniqueRole('dispose')
  const l = await client.acquireLeadership(role, 'a', FAST)
  assert.equal(typeof l[Symbol.asyncDispose], 'function')
  await l[Symbol.asyncDispose]()
  assert.equal(l.isHeld, false)
  assert.ok(l.error instanceof kc.ResignedError, `${l.error}`)
  assert.deepEqual(await members(role), [])
  // A term already over: nothing to do.
  await l[Symbol.asyncDispose]()

  assert.equal(client.closed, false)
  await client[Symbol.asyncDispose]()
  assert.equal(client.closed, true)
  await assert.rejects(client.describeLeadership(role), kc.InvalidArgumentError)
})
