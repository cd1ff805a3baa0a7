'use strict'
// The core's log records reach kc.logger ('log' events) on the JavaScript
// thread: a warning the core logs on a real Kafka (the one-node cluster's
// state topic has min.insync.replicas=1, which every topic check warns
// about), the level filter (nothing below the chosen level arrives, from
// the core's own events and from the bridge's probe), and removing the last
// listener stops the forwarding. Records arrive in the order they were
// logged (one queue, one delivering thread), so a probe record logged last
// marks that everything logged before it was delivered: no test waits for
// a fixed time.

const test = require('node:test')
const assert = require('node:assert/strict')
const kc = require('..')
const { FAST, kafka, closeShared, uniqueRole } = require('./support')

test.after(() => closeShared())

let marks = 0
/** Logs a probe record at `level` and resolves once `listener`'s records
 * include it; resolves with the records that came before it. */
function drain(records, level = 'error') {
  const text = `mark ${++marks}`
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the probe record ${text} never arrived; got ${JSON.stringify(records)}`)), 10_000)
    const check = (r) => {
      if (r.message !== text) return
      clearTimeout(timer)
      kc.logger.off('log', check)
      const i = records.findIndex((x) => x.message === text)
      resolve(records.slice(0, i))
    }
    kc.logger.on('log', check)
    kc._logFromCore(level, text, 'probe-role', 'probe-member')
  })
}

function collect() {
  const records = []
  const listener = (r) => records.push(r)
  kc.logger.on('log', listener)
  return { records, stop: () => kc.logger.off('log', listener) }
}

test('the default level is warn; setLogLevel refuses an unknown level', () => {
  assert.equal(kc.getLogLevel(), 'warn')
  assert.throws(() => kc.setLogLevel('verbose'), { name: 'InvalidArgumentError', code: 'INVALID_ARGUMENT', field: 'level' })
  assert.throws(() => kc.setLogLevel(30), kc.InvalidArgumentError)
  assert.equal(kc.getLogLevel(), 'warn')
})

test("a warning the core logs on a topic check reaches the logger with its level and target", async () => {
  const { client } = await kafka()
  const c = collect()
  try {
    const report = await client.checkStateTopic()
    assert.equal(report.minInsyncReplicas, 1, 'the one-node test cluster has min.insync.replicas=1')
    const before = await drain(c.records)
    const warning = before.find((r) => r.message.includes('min.insync.replicas=1'))
    assert.ok(warning, `no min.insync.replicas warning among ${JSON.stringify(before)}`)
    assert.equal(warning.level, 'warn')
    assert.equal(warning.target, 'krabka_coordination::transport::kafka::topic')
    assert.match(warning.file, /core\/src\/transport\/kafka\/topic\.rs$/)
    assert.equal(typeof warning.line, 'number')
    assert.deepEqual(warning.fields, {})
    assert.ok(Object.isFrozen(warning))
  } finally {
    c.stop()
  }
})

test('a record carries its fields and the member context of its span', async () => {
  const c = collect()
  try {
    await drain(c.records, 'error')
    const r = c.records.at(-1)
    assert.equal(r.level, 'error')
    assert.deepEqual(r.context, { role: 'probe-role', member: 'probe-member' })
    assert.deepEqual(r.fields, { probe: 'true' })
    assert.equal(r.text, `role=probe-role member=probe-member: ${r.message} probe=true`)
    assert.equal(r.target, 'krabka_coordination_node::log')
  } finally {
    c.stop()
  }
})

test('nothing below the chosen level arrives', async () => {
  const c = collect()
  try {
    for (const level of ['trace', 'debug', 'info', 'warn', 'error']) kc._logFromCore(level, `at ${level}`, 'r', 'm')
    let got = (await drain(c.records)).filter((r) => /^at \w+$/.test(r.message))
    assert.deepEqual(got.map((r) => r.level), ['warn', 'error'])

    kc.setLogLevel('error')
    for (const level of ['trace', 'debug', 'info', 'warn', 'error']) kc._logFromCore(level, `at ${level} 2`, 'r', 'm')
    got = (await drain(c.records)).filter((r) => /^at \w+ 2$/.test(r.message))
    assert.deepEqual(got.map((r) => r.level), ['error'])

    kc.setLogLevel('trace')
    for (const level of ['trace', 'debug', 'info', 'warn', 'error']) kc._logFromCore(level, `at ${level} 3`, 'r', 'm')
    got = (await drain(c.records)).filter((r) => /^at \w+ 3$/.test(r.message))
    assert.deepEqual(got.map((r) => r.level), ['trace', 'debug', 'info', 'warn', 'error'])
  } finally {
    kc.setLogLevel('warn')
    c.stop()
  }
})

test("the core's own info records of an acquire arrive at 'info', none at 'warn'", async () => {
  const { settings } = await kafka()
  const client = new kc.Client(settings)
  const c = collect()
  try {
    const role = uniqueRole('log-levels')
    kc.setLogLevel('info')
    let l = await client.acquireLeadership(role, 'a', FAST)
    await l.resign()
    const info = await drain(c.records)
    const elected = info.find((r) => r.message === 'elected' && r.context.role === role)
    assert.ok(elected, `no 'elected' record among ${JSON.stringify(info.map((r) => r.message))}`)
    assert.equal(elected.level, 'info')
    assert.equal(elected.context.member, 'a')
    assert.equal(elected.fields.token, `${l.token.producerId}/${l.token.producerEpoch}`)

    kc.setLogLevel('warn')
    c.records.length = 0
    l = await client.acquireLeadership(role, 'a', FAST)
    await l.resign()
    const warn = await drain(c.records)
    const below = warn.filter((r) => !['warn', 'error'].includes(r.level))
    assert.deepEqual(below, [])
    assert.ok(!warn.some((r) => r.message === 'elected'))
  } finally {
    kc.setLogLevel('warn')
    c.stop()
    client.close()
  }
})

test('removing the last listener stops the forwarding', async () => {
  const { client } = await kafka()
  const first = collect()
  await drain(first.records)
  first.stop()
  assert.equal(kc.logger.listenerCount('log'), 0)
  // Logged while nobody listens: neither the core's warning nor the probe
  // is forwarded, so the next listener does not get them either.
  await client.checkStateTopic()
  kc._logFromCore('error', 'while nobody listens', 'r', 'm')
  const countBefore = first.records.length
  const second = collect()
  try {
    const got = await drain(second.records)
    assert.deepEqual(got, [], `forwarded while nobody listened: ${JSON.stringify(got)}`)
    assert.equal(first.records.length, countBefore)
  } finally {
    second.stop()
  }
})

test('a process with a logger attached exits by itself', async () => {
  const { execFile } = require('node:child_process')
  // The child keeps itself alive (an interval) until its record arrived,
  // then clears it: a logger whose delivery kept the process alive would
  // hang it until the timeout.
  const script = `
    const kc = require(${JSON.stringify(require.resolve('..'))})
    const alive = setInterval(() => {}, 1000)
    kc.logger.on('log', (r) => {
      console.log(r.level, r.message)
      clearInterval(alive)
    })
    kc._logFromCore('warn', 'from the child', 'r', 'm')
  `
  const out = await new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', script], { timeout: 30_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`the child did not exit by itself: ${err.message} ${stderr}`))
      else resolve(stdout)
    })
  })
  assert.equal(out, 'warn from the child\n')
})
