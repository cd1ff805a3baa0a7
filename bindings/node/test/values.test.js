'use strict'
// The conformance surface beyond the vectors: bigint in and out, numbers
// converted exactly or refused, bad arguments with clear errors and stable
// codes, the error classes of every core kind and their cause chain, and
// both entry points (require and import).

const test = require('node:test')
const assert = require('node:assert/strict')
const kc = require('..')

function throwsArg(fn, ctor, message, field) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof ctor, `${e} is not a ${ctor.name}`)
    assert.equal(e.code, 'INVALID_ARGUMENT')
    if (field !== undefined) assert.equal(e.field, field)
    assert.match(e.message, message)
    return true
  })
}

test('i64 fields are bigint out; a safe integer number is converted exactly', () => {
  const t = new kc.FencingToken(4001, 7)
  assert.equal(t.producerId, 4001n)
  assert.equal(t.producerEpoch, 7)
  const big = new kc.FencingToken(9223372036854775807n, -32768)
  assert.equal(big.producerId, 9223372036854775807n)
  const r = new kc.Registration('m', Number.MAX_SAFE_INTEGER)
  assert.equal(r.registeredAt, 9007199254740991n)
  const min = new kc.Registration('m', -9223372036854775808n)
  assert.equal(kc.decodeRegistration(kc.encodeRegistration(min)).registeredAt, -9223372036854775808n)
})

test('a number that could lose precision is refused, never rounded', () => {
  throwsArg(() => new kc.Registration('m', Number.MAX_SAFE_INTEGER + 1), kc.InvalidArgumentError, /registered_at must be a bigint/, 'registered_at')
  throwsArg(() => new kc.Registration('m', 1.5), kc.InvalidArgumentError, /registered_at must be an integer, got 1\.5/)
  throwsArg(() => new kc.Lease('m', kc.NO_EPOCH, NaN, 1n), kc.InvalidArgumentError, /granted_at must be an integer, got NaN/)
  throwsArg(() => new kc.FencingToken(2n ** 63n, 0), kc.InvalidArgumentError, /producer_id does not fit the layout's i64 .*got 9223372036854775808/, 'producer_id')
  throwsArg(() => new kc.FencingToken(1n, 32768), kc.InvalidArgumentError, /producer_epoch does not fit the layout's i16 \(from -32768 to 32767\): got 32768/)
  throwsArg(() => kc.rolePartition('r', 2 ** 31), kc.InvalidArgumentError, /partitions does not fit the layout's i32/)
})

test('wrong types are InvalidArgumentErrors naming the argument', () => {
  throwsArg(() => kc.Key.lease(5), kc.InvalidArgumentError, /^role must be a string, got number$/, 'role')
  throwsArg(() => kc.Key.registration('r', null), kc.InvalidArgumentError, /^member must be a string, got null$/, 'member')
  throwsArg(() => new kc.FencingToken('1', 0), kc.InvalidArgumentError, /producer_id must be a bigint .*got string/)
  throwsArg(() => new kc.Lease('m', { producerId: 1n, producerEpoch: 0 }, 1n, 2n), kc.InvalidArgumentError, /token must be a FencingToken, got object/)
  throwsArg(() => kc.decodeLease('00'), kc.InvalidArgumentError, /data must be a Buffer or Uint8Array, got string/)
  throwsArg(() => kc.decodeLease([0, 0]), kc.InvalidArgumentError, /got Array/)
  throwsArg(() => kc.decodeLease(new Uint16Array(4)), kc.InvalidArgumentError, /data must be a Buffer or Uint8Array/)
  throwsArg(() => kc.encodeLease(new kc.Registration('m', 1n)), kc.InvalidArgumentError, /lease must be a Lease, got object/)
  throwsArg(() => kc.encodeKey(undefined), kc.InvalidArgumentError, /key must be a Key, got undefined/)
  throwsArg(() => kc.rolePartition('r', '16'), kc.InvalidArgumentError, /partitions must be an integer number, got string/)
})

test('refused values carry the core kind: an empty role, a count below 1', () => {
  throwsArg(() => kc.rolePartition('', 16), kc.InvalidArgumentError, /role must not be empty/)
  throwsArg(() => kc.rolePartition('r', 0), kc.InvalidArgumentError, /partitions must be at least 1/)
  assert.throws(
    () => kc.encodeKey(kc.Key.lease('')),
    (e) => e instanceof kc.EncodeError && e.code === 'ENCODE' && e.part === 'key' && e.field === 'role',
  )
  assert.throws(
    () => kc.encodeLease(new kc.Lease('x'.repeat(32768), kc.NO_EPOCH, 0n, 0n)),
    (e) => e instanceof kc.EncodeError && e.part === 'lease value' && e.field === 'member',
  )
})

test('a client refuses bad settings and options before any I/O', () => {
  throwsArg(() => new kc.Client('127.0.0.1:1'), kc.InvalidArgumentError, /kafka must be an object of librdkafka settings/, 'kafka')
  throwsArg(() => new kc.Client({ 'bootstrap.servers': '127.0.0.1:1' }, { connectTimeout: 0 }), kc.InvalidArgumentError, /connect_timeout must be a positive number of seconds, got 0/)
  throwsArg(() => new kc.Client({ 'bootstrap.servers': '127.0.0.1:1' }, { operationTimeout: 'soon' }), kc.InvalidArgumentError, /operation_timeout must be a number of seconds, got string/)
  throwsArg(() => new kc.Client({ 'bootstrap.servers': '127.0.0.1:1' }, { partitions: 0 }), kc.InvalidArgumentError, /partitions must be an integer from 1 to 2147483647, got 0/)
  throwsArg(() => new kc.Client({ 'bootstrap.servers': '127.0.0.1:1', 'no.such.setting': 1 }), kc.InvalidArgumentError, /no\.such\.setting/)
  throwsArg(() => new kc.Client({ 'bootstrap.servers': '127.0.0.1:1', 'socket.timeout.ms': {} }), kc.InvalidArgumentError, /kafka setting "socket.timeout.ms" must be a string, number or boolean/)
})

test('acquire arguments are refused by the promise, before any I/O', async () => {
  const client = new kc.Client({ 'bootstrap.servers': '127.0.0.1:1' })
  try {
    const rejects = (p, ctor, message) =>
      assert.rejects(p, (e) => e instanceof ctor && e.code === 'INVALID_ARGUMENT' && message.test(e.message))
    await rejects(client.acquireLeadership('', 'm'), kc.InvalidArgumentError, /role/)
    await rejects(client.acquireLeadership(7, 'm'), kc.InvalidArgumentError, /^role must be a string, got number$/)
    await rejects(client.acquireLeadership('r', 'm', { leaseDuration: -1 }), kc.InvalidArgumentError, /lease_duration must be a positive number of seconds, got -1/)
    await rejects(client.acquireLeadership('r', 'm', { leaseDuration: 3 }), kc.InvalidArgumentError, /lease duration \(3 s\) must exceed the renew interval \(10 s\)/)
    await rejects(client.acquireLeadership('r', 'm', { renewInterval: '1' }), kc.InvalidArgumentError, /renew_interval must be a number of seconds, got string/)
    await rejects(client.acquireLeadership('r', 'm', { signal: 'stop' }), kc.InvalidArgumentError, /signal must be an AbortSignal, got string/)
    await rejects(client.acquireLeadership('r', 'm', 'fast'), kc.InvalidArgumentError, /options must be an object .*got string/)
    await rejects(client.ensureStateTopic({ minInsyncReplicas: 4 }), kc.InvalidArgumentError, /min_insync_replicas must be an integer from 1 to 3, got 4/)
    await rejects(client.describeLeadership(null), kc.InvalidArgumentError, /role must be a string, got null/)
    assert.equal(client._describeRequests(), 0)
  } finally {
    client.close()
  }
  assert.equal(client.closed, true)
  await assert.rejects(client.describeLeadership('r'), (e) => e instanceof kc.InvalidArgumentError && /the client is closed/.test(e.message))
})

test('every core kind maps to its class and stable code', () => {
  const variants = {
    format: kc.FormatError,
    encode: kc.EncodeError,
    invalid_argument: kc.InvalidArgumentError,
    fenced: kc.FencedError,
    transient: kc.TransientError,
    fatal: kc.FatalError,
    resigned: kc.ResignedError,
    cancelled: kc.CancelledError,
    lease_expired: kc.LeaseExpiredError,
    outcome_unknown: kc.OutcomeUnknownError,
  }
  const kinds = kc.errorKinds()
  assert.deepEqual(kinds.map((k) => k.code), Object.values(variants).map((c) => c.code))
  assert.deepEqual(kinds.filter((k) => k.retryable).map((k) => k.code), ['TRANSIENT'])
  for (const [variant, cls] of Object.entries(variants)) {
    assert.throws(
      () => kc._throwCoreError(variant, 'why'),
      (e) => {
        assert.ok(e instanceof cls && e instanceof kc.KrabkaError && e instanceof Error, `${variant}: ${e}`)
        assert.equal(e.name, cls.name)
        assert.equal(e.code, cls.code)
        assert.ok(e.message.length > 0)
        return true
      },
    )
  }
  // A user-made error has its class's code too.
  assert.equal(new kc.FencedError('x').code, 'FENCED')
})

test('the cause chain is kept, each core link by its own kind', () => {
  assert.throws(
    () => kc._throwCoreError('shared', 'the leadership ended'),
    (e) => {
      assert.ok(e instanceof kc.FatalError)
      assert.ok(e.cause instanceof kc.TransientError, `${e.cause}`)
      assert.equal(e.cause.code, 'TRANSIENT')
      assert.ok(e.cause.cause instanceof Error)
      assert.equal(e.cause.cause.message, 'the broker did not answer')
      return true
    },
  )
  assert.throws(
    () => kc._throwCoreError('outcome_unknown', 'writing'),
    (e) => e instanceof kc.OutcomeUnknownError && e.cause instanceof kc.FencedError,
  )
})

test('values: equality, order, strings', () => {
  const a = new kc.FencingToken(4001n, 32766)
  const b = new kc.FencingToken(4002n, 0)
  assert.equal(a.compare(b), -1)
  assert.deepEqual([b, a, kc.NO_EPOCH].sort((x, y) => x.compare(y)).map(String), [
    'NoEpoch',
    '4001/32766',
    '4002/0',
  ])
  assert.ok(kc.NO_EPOCH.isNoEpoch)
  assert.equal(a.equals('x'), false)
  const key = kc.Key.registration('orders', 'node-1')
  assert.equal(key.kind, 'registration')
  assert.ok(kc.decodeKey(kc.encodeKey(key)).equals(key))
  assert.equal(kc.Key.lease('orders').member, '')
  assert.equal(String(key), 'Key.registration("orders", "node-1")')
})

test('decodeLeases decodes a batch as decodeLease does each value', () => {
  const leases = []
  for (let i = 0; i < 300; i++) {
    const member = i % 3 === 0 ? `m-${i}` : i % 3 === 1 ? `ünïcode-${i}-✓-𝄞` : 'x'.repeat(200 + i)
    leases.push(new kc.Lease(member, new kc.FencingToken(BigInt(i) - 1n, (i * 97) % 65536 - 32768), -(2n ** 63n) + BigInt(i), 2n ** 63n - 1n - BigInt(i)))
  }
  const bytes = leases.map((l) => kc.encodeLease(l))
  // A Uint8Array that is a view into the middle of a larger buffer, too.
  const wide = new Uint8Array(bytes[5].length + 7)
  wide.set(bytes[5], 3)
  bytes.push(wide.subarray(3, 3 + bytes[5].length))
  const batch = kc.decodeLeases(bytes)
  assert.equal(batch.length, bytes.length)
  bytes.forEach((b, i) => {
    const one = kc.decodeLease(b)
    assert.ok(batch[i] instanceof kc.Lease)
    assert.ok(batch[i].equals(one), `value ${i}: ${batch[i]} != ${one}`)
    assert.ok(batch[i].token instanceof kc.FencingToken)
    assert.ok(Object.isFrozen(batch[i]) && Object.isFrozen(batch[i].token))
  })
  assert.ok(batch[300].equals(leases[5]))
  assert.deepEqual(kc.decodeLeases([]), [])
})

test('decodeLeases reports the first bad element as decodeLease would, with its index', () => {
  const good = kc.encodeLease(new kc.Lease('m', new kc.FencingToken(1n, 2), 3n, 4n))
  const truncated = good.subarray(0, good.length - 1)
  assert.throws(() => kc.decodeLeases([good, good, truncated, 'not bytes']), (e) => {
    assert.ok(e instanceof kc.FormatError, `${e}`)
    assert.equal(e.part, 'lease value')
    assert.equal(e.index, 2)
    assert.match(e.message, /^values\[2\]: /)
    let single
    try {
      kc.decodeLease(truncated)
    } catch (s) {
      single = s
    }
    assert.equal(e.message, `values[2]: ${single.message}`)
    return true
  })
  assert.throws(() => kc.decodeLeases([good, 42]), (e) => {
    assert.ok(e instanceof kc.InvalidArgumentError, `${e}`)
    assert.equal(e.index, 1)
    assert.match(e.message, /^values\[1\]: .*Buffer or Uint8Array/)
    return true
  })
  throwsArg(() => kc.decodeLeases(good), kc.InvalidArgumentError, /values must be an Array of Buffer or Uint8Array/, 'values')
})

test('import works as require does', async () => {
  const esm = await import('krabka-coordination')
  assert.equal(esm.FencingToken, kc.FencingToken)
  assert.equal(esm.Client, kc.Client)
  assert.equal(esm.default, kc)
  const names = Object.keys(kc).filter((n) => !n.startsWith('_'))
  for (const n of names) assert.ok(n in esm, `import lacks ${n}`)
})
