'use strict'
// The core's metrics in JavaScript: metrics() and metricsText() read the
// shared recorder, installed when the package loads. An acquire on the real
// Kafka moves the role's election counter and holds its gauge at 1; the
// resign moves the resign counter and sets the gauge back to 0; the text
// has the same series with the role's label.

const test = require('node:test')
const assert = require('node:assert/strict')
const kc = require('..')
const { FAST, kafka, closeShared, uniqueRole } = require('./support')

test.after(() => closeShared())

function sample(name, role, member) {
  return kc.metrics().find((s) => s.name === name && s.labels.role === role && (member === undefined || s.labels.member === member))
}

test('an election moves the role counters of metrics() and metricsText()', async () => {
  const { settings } = await kafka()
  const client = new kc.Client(settings)
  const role = uniqueRole('metrics')
  try {
    assert.equal(sample('krabka_elections_total', role), undefined, 'a new role has no series yet')
    const l = await client.acquireLeadership(role, 'a', FAST)
    const elections = sample('krabka_elections_total', role, 'a')
    assert.deepEqual(elections, { name: 'krabka_elections_total', help: 'Terms won.', labels: { role, member: 'a' }, kind: 'counter', value: 1 })
    const held = sample('krabka_role_held', role, 'a')
    assert.equal(held.kind, 'gauge')
    assert.equal(held.value, 1)
    const acquire = kc.metrics().find((s) => s.kind === 'histogram' && s.labels.role === role)
    assert.ok(acquire, `no histogram of role ${role}: ${JSON.stringify(kc.metrics().map((s) => s.name))}`)
    assert.equal(acquire.count, 1)
    assert.ok(acquire.sum > 0)
    assert.deepEqual(acquire.buckets.slice(-2).map(([le]) => le), [60, Infinity])
    assert.equal(acquire.buckets.at(-1)[1], acquire.count)
    assert.ok(acquire.buckets.every(([le, n], i, all) => typeof le === 'number' && n <= acquire.count && (i === 0 || n >= all[i - 1][1])))

    const text = kc.metricsText()
    assert.match(text, /^# HELP krabka_elections_total Terms won\.\n# TYPE krabka_elections_total counter$/m)
    assert.ok(text.includes(`krabka_elections_total{role="${role}",member="a"} 1\n`), text)

    await l.resign()
    assert.equal(sample('krabka_resigns_total', role, 'a').value, 1)
    assert.equal(sample('krabka_role_held', role, 'a').value, 0)
    const again = await client.acquireLeadership(role, 'a', FAST)
    assert.equal(sample('krabka_elections_total', role, 'a').value, 2)
    assert.ok(kc.metricsText().includes(`krabka_elections_total{role="${role}",member="a"} 2\n`))
    await again.resign()
  } finally {
    client.close()
  }
})

test('metrics() is ordered by name, then labels, and every kind has its fields', () => {
  const all = kc.metrics()
  const keys = all.map((s) => [s.name, JSON.stringify(Object.entries(s.labels))])
  for (let i = 1; i < keys.length; i++) assert.ok(keys[i - 1][0] <= keys[i][0], `${keys[i - 1][0]} before ${keys[i][0]}`)
  for (const s of all) {
    assert.ok(['counter', 'gauge', 'histogram'].includes(s.kind))
    if (s.kind === 'histogram') assert.deepEqual(Object.keys(s).sort(), ['buckets', 'count', 'help', 'kind', 'labels', 'name', 'sum'])
    else assert.deepEqual(Object.keys(s).sort(), ['help', 'kind', 'labels', 'name', 'value'])
    assert.ok(s.help.endsWith('.'), s.name)
  }
})
