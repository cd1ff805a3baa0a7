'use strict'
// The core's metrics in a prom-client registry (registerMetrics) on the
// real Kafka: every metric of the core registered with its kind and help
// before any series exists; after an acquire, the registry's text has the
// member's counters (the alerting ones at 0), its gauge, and the role's
// acquire histogram with every bucket, +Inf, _sum and _count, equal to
// metrics(); prom-client's JSON has the same values. prom-client is the
// examples' devDependency (the package only names it as an optional peer).

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const kc = require('..')
const { FAST, kafka, closeShared, uniqueRole } = require('./support')

const promClient = require(require.resolve('prom-client', { paths: [path.join(__dirname, '..', '..', '..', 'examples', 'node')] }))

test.after(() => closeShared())

/** `name{labels} value` lines of a text, by `name{labels}`. */
function samples(text) {
  const out = new Map()
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const at = line.lastIndexOf(' ')
    out.set(line.slice(0, at), Number(line.slice(at + 1)))
  }
  return out
}

test('registerMetrics registers every metric of the core with its type and help', () => {
  const registry = new promClient.Registry()
  const registered = kc.registerMetrics(promClient, registry)
  const names = registered.map((m) => m.name)
  assert.ok(names.includes('krabka_fences_total') && names.includes('krabka_acquire_seconds'), names.join())
  assert.deepEqual(
    registry.getSingleMetric('krabka_fences_total') && [registered.find((m) => m.name === 'krabka_fences_total').type],
    ['counter'],
  )
  assert.equal(registry.getSingleMetric('krabka_handover_seconds').type, 'histogram')
  assert.equal(registry.getSingleMetric('krabka_role_held').type, 'gauge')
  assert.equal(registry.getSingleMetric('krabka_elections_total').help, 'Terms won.')
  // A name registered twice is the registry's error.
  assert.throws(() => kc.registerMetrics(promClient, registry), /already been registered/)
  assert.throws(() => kc.registerMetrics({}, registry), (e) => e instanceof kc.InvalidArgumentError && e.code === 'INVALID_ARGUMENT' && e.field === 'promClient')
  assert.throws(() => kc.registerMetrics(promClient, {}), (e) => e instanceof kc.InvalidArgumentError && e.field === 'registry')
  // The default is prom-client's global registry.
  kc.registerMetrics(promClient)
  try {
    assert.equal(promClient.register.getSingleMetric('krabka_fences_total').help, 'Terms ended by a newer epoch.')
  } finally {
    for (const m of registered) promClient.register.removeSingleMetric(m.name)
  }
})

test('a scrape of the registry has the core series: counters at 0, gauges, histograms with +Inf', async () => {
  const { settings } = await kafka()
  const registry = new promClient.Registry()
  kc.registerMetrics(promClient, registry)
  const client = new kc.Client(settings)
  const role = uniqueRole('prom-client')
  try {
    const l = await client.acquireLeadership(role, 'a', FAST)
    let text
    try {
      text = await registry.metrics()
    } finally {
      await l.resign()
    }
    // Each metric: HELP, then TYPE, then its samples.
    assert.match(text, /^# HELP krabka_elections_total Terms won\.\n# TYPE krabka_elections_total counter\n/m)
    assert.match(text, /^# HELP krabka_acquire_seconds .+\n# TYPE krabka_acquire_seconds histogram\n/m)
    const s = samples(text)
    const member = `{role="${role}",member="a"}`
    assert.equal(s.get(`krabka_elections_total${member}`), 1, text)
    assert.equal(s.get(`krabka_role_held${member}`), 1, text)
    for (const c of ['fences', 'renewal_failures', 'lease_expirations', 'challenges_lost', 'resigns']) {
      assert.equal(s.get(`krabka_${c}_total${member}`), 0, `${c}: ${text}`)
    }
    const inf = s.get(`krabka_acquire_seconds_bucket{role="${role}",le="+Inf"}`)
    assert.equal(inf, 1, text)
    assert.equal(s.get(`krabka_acquire_seconds_count{role="${role}"}`), 1, text)
    assert.ok(s.get(`krabka_acquire_seconds_sum{role="${role}"}`) > 0, text)
    assert.ok(s.get(`krabka_acquire_seconds_bucket{role="${role}",le="60"}`) <= 1, text)
    // The same numbers as metrics(), whose buckets end with [Infinity, count].
    const acquire = kc.metrics().find((m) => m.name === 'krabka_acquire_seconds' && m.labels.role === role)
    assert.deepEqual(acquire.buckets.at(-1), [Infinity, acquire.count])
    for (const [le, n] of acquire.buckets) {
      const key = `krabka_acquire_seconds_bucket{role="${role}",le="${le === Infinity ? '+Inf' : le}"}`
      assert.equal(s.get(key), n, key)
    }
    // prom-client's JSON reads the same objects.
    const json = await registry.getMetricsAsJSON()
    const fences = json.find((m) => m.name === 'krabka_fences_total')
    assert.equal(fences.type, 'counter')
    assert.deepEqual(fences.values.find((v) => v.labels.role === role), { labels: { role, member: 'a' }, value: 0 })
  } finally {
    client.close()
  }
})
