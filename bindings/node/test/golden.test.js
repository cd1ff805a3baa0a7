'use strict'
// Every golden vector of the repository, through the package.
//
// Each test walks a whole file, counts what it checked, and asserts the
// count equals the number of entries in the file (and that the file is not
// empty), so a vector that is skipped or a file that shrinks to nothing fails
// the suite instead of passing it quietly. Failures are collected and
// reported together with the case names. i64 fields are compared as bigint.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const kc = require('..')

const GOLDEN_DIR = process.env.KRABKA_GOLDEN_DIR ?? path.resolve(__dirname, '../../../golden')

function load(name) {
  const data = JSON.parse(fs.readFileSync(path.join(GOLDEN_DIR, name), 'utf8'))
  assert.equal(data.format, 1, `${name}: unsupported format ${data.format}`)
  return data
}

const DECODERS = {
  key: kc.decodeKey,
  'registration value': kc.decodeRegistration,
  'lease value': kc.decodeLease,
}

// i64 fields are JSON strings of decimal digits: BigInt parses them exactly.
const i64 = (s) => {
  assert.equal(typeof s, 'string')
  return BigInt(s)
}

function expectedValue(c) {
  switch (c.part) {
    case 'key':
      if (c.kind === 'registration') return kc.Key.registration(c.role, c.member)
      assert.equal(c.kind, 'lease')
      assert.equal(c.member, '')
      return kc.Key.lease(c.role)
    case 'registration value':
      return new kc.Registration(c.member, i64(c.registered_at))
    case 'lease value':
      return new kc.Lease(
        c.member,
        new kc.FencingToken(i64(c.producer_id), c.producer_epoch),
        i64(c.granted_at),
        i64(c.deadline),
      )
    default:
      throw new Error(`unknown part ${c.part}`)
  }
}

function checkFields(c, got) {
  if (c.part === 'key') {
    assert.equal(got.kind, c.kind)
    assert.equal(got.role, c.role)
    assert.equal(got.member, c.member)
  } else if (c.part === 'registration value') {
    assert.equal(got.member, c.member)
    assert.equal(typeof got.registeredAt, 'bigint')
    assert.equal(got.registeredAt, i64(c.registered_at))
  } else {
    assert.equal(got.member, c.member)
    assert.equal(typeof got.token.producerId, 'bigint')
    assert.equal(got.token.producerId, i64(c.producer_id))
    assert.equal(got.token.producerEpoch, c.producer_epoch)
    assert.equal(got.grantedAt, i64(c.granted_at))
    assert.equal(got.deadline, i64(c.deadline))
  }
}

function encode(value) {
  if (value instanceof kc.Key) return kc.encodeKey(value)
  if (value instanceof kc.Registration) return kc.encodeRegistration(value)
  return kc.encodeLease(value)
}

test('record cases decode and encode exactly', () => {
  const { cases } = load('records.json')
  assert.ok(cases.length > 0, 'records.json has no cases')
  let checked = 0
  const perPart = { key: 0, 'registration value': 0, 'lease value': 0 }
  const failures = []
  for (const c of cases) {
    try {
      const data = Buffer.from(c.hex, 'hex')
      const expected = expectedValue(c)
      for (const form of [data, new Uint8Array(data)]) {
        const got = DECODERS[c.part](form)
        assert.ok(got.equals(expected), `decoded ${got} from ${form.constructor.name}`)
        checkFields(c, got)
      }
      const encoded = encode(expected)
      assert.ok(Buffer.isBuffer(encoded))
      assert.equal(encoded.toString('hex'), c.hex, 'encoding the listed fields')
    } catch (e) {
      failures.push(`${JSON.stringify(c.name)} (${c.part}): ${e.message}`)
      continue
    }
    checked += 1
    perPart[c.part] += 1
  }
  assert.deepEqual(failures, [])
  assert.equal(checked, cases.length)
  for (const [part, n] of Object.entries(perPart)) assert.ok(n > 0, `no ${part} cases`)
  console.log(`records.json: ${checked} of ${cases.length} cases checked`)
})

test('malformed entries throw FormatError with their part', () => {
  const { malformed } = load('records.json')
  assert.ok(malformed.length > 0, 'records.json has no malformed entries')
  let checked = 0
  const perPart = { key: 0, 'registration value': 0, 'lease value': 0 }
  const failures = []
  for (const m of malformed) {
    let value
    try {
      value = DECODERS[m.part](Buffer.from(m.hex, 'hex'))
    } catch (e) {
      if (!(e instanceof kc.FormatError) || !(e instanceof kc.KrabkaError) || !(e instanceof Error)) {
        failures.push(`${JSON.stringify(m.name)}: threw ${e}, not a FormatError`)
      } else if (e.part !== m.part) {
        failures.push(`${JSON.stringify(m.name)}: part ${e.part}, expected ${m.part}`)
      } else if (e.code !== 'FORMAT' || !e.message) {
        failures.push(`${JSON.stringify(m.name)}: code ${e.code}, message ${JSON.stringify(e.message)}`)
      } else {
        checked += 1
        perPart[m.part] += 1
      }
      continue
    }
    failures.push(`${JSON.stringify(m.name)}: decoded to ${value}`)
  }
  assert.deepEqual(failures, [])
  assert.equal(checked, malformed.length)
  for (const [part, n] of Object.entries(perPart)) assert.ok(n > 0, `no malformed ${part} entries`)
  console.log(`records.json: ${checked} of ${malformed.length} malformed entries checked`)
})

test('lease cases decode as one batch, malformed ones by their index', () => {
  const { cases, malformed } = load('records.json')
  const leases = cases.filter((c) => c.part === 'lease value')
  assert.ok(leases.length > 0, 'records.json has no lease cases')
  const got = kc.decodeLeases(leases.map((c) => Buffer.from(c.hex, 'hex')))
  assert.equal(got.length, leases.length)
  leases.forEach((c, i) => {
    assert.ok(got[i].equals(expectedValue(c)), `${JSON.stringify(c.name)}: decoded ${got[i]}`)
    checkFields(c, got[i])
  })
  const bad = malformed.filter((m) => m.part === 'lease value')
  assert.ok(bad.length > 0, 'records.json has no malformed lease entries')
  const good = Buffer.from(leases[0].hex, 'hex')
  let refused = 0
  for (const m of bad) {
    assert.throws(() => kc.decodeLeases([good, Buffer.from(m.hex, 'hex'), good]), (e) => {
      assert.ok(e instanceof kc.FormatError, `${JSON.stringify(m.name)}: threw ${e}`)
      assert.equal(e.part, 'lease value')
      assert.equal(e.index, 1)
      return true
    })
    refused += 1
  }
  console.log(`records.json: ${leases.length} lease cases in one batch, ${refused} of ${bad.length} malformed lease entries refused in a batch`)
})

test('partitions', () => {
  const { cases } = load('partitions.json')
  assert.ok(cases.length > 0, 'partitions.json has no cases')
  let checked = 0
  const failures = []
  for (const c of cases) {
    const hash = kc.murmur2(Buffer.from(c.role, 'utf8'))
    const got = kc.rolePartition(c.role, c.partitions)
    if (hash !== c.murmur2 || got !== c.partition) {
      failures.push(`${JSON.stringify(c.role)} in ${c.partitions}: murmur2 ${hash} partition ${got}, expected ${c.murmur2} ${c.partition}`)
    } else {
      checked += 1
    }
  }
  assert.deepEqual(failures.slice(0, 50), [])
  assert.equal(checked, cases.length)
  assert.ok(cases.some((c) => c.murmur2 < 0), 'a negative hash must be among the cases')
  console.log(`partitions.json: ${checked} of ${cases.length} cases checked`)
})

test('token order', () => {
  const { cases } = load('tokens.json')
  assert.ok(cases.length > 0, 'tokens.json has no cases')
  const token = (t) => new kc.FencingToken(i64(t.producer_id), t.producer_epoch)
  const want = { less: -1, equal: 0, greater: 1 }
  let checked = 0
  const seen = new Set()
  const failures = []
  for (const c of cases) {
    const a = token(c.a)
    const b = token(c.b)
    const cmp = a.compare(b)
    const back = b.compare(a)
    if (cmp !== want[c.order] || back !== -want[c.order] || a.equals(b) !== (c.order === 'equal')) {
      failures.push(`${a} vs ${b}: compare ${cmp}, expected ${c.order}`)
    } else {
      checked += 1
      seen.add(c.order)
    }
  }
  assert.deepEqual(failures, [])
  assert.equal(checked, cases.length)
  assert.deepEqual([...seen].sort(), ['equal', 'greater', 'less'])
  // NO_EPOCH, as the file spells it.
  assert.ok(kc.NO_EPOCH.equals(new kc.FencingToken(-1n, -1)))
  console.log(`tokens.json: ${checked} of ${cases.length} cases checked`)
})
