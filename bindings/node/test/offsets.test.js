'use strict'
// Input offsets in the guarded transaction on a real Kafka (KRABKA_BOOTSTRAP;
// unset or unreachable fails every test here, loudly): a leader's
// writeWithOffsets commits the group's offsets with its records and
// committedOffsets (its own, then its successor's) returns them; a deposed
// leader's write with offsets rejects with a FencedError and the group's
// offset stays where the last leader committed it; bad offsets reject with
// an InvalidArgumentError naming the value, nothing sent, the term held.

const test = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const kc = require('..')
const { kafka, closeShared, uniqueRole, dataTopic, mintNewerEpoch } = require('./support')

const INPUT = 'krabka-node-eos-input'
const OUTPUT = 'krabka-node-eos-output'
// A 30 s lease renewed every 10 s: no renewal meets a newer epoch before the
// guarded write under test does.
const SLOW = { leaseDuration: 30, renewInterval: 10, challengeStagger: 1 }

test.after(() => closeShared())

const uniqueGroup = (name) => `node-eos-${name}-${crypto.randomBytes(5).toString('hex')}`
const out = (text) => ({ topic: OUTPUT, value: Buffer.from(text) })
const after = (group, offset, metadata) => ({
  group,
  offsets: [{ topic: INPUT, partition: 0, offset, metadata }],
})

test("a leader's offsets commit with its records; it and its successor read them back", async () => {
  const { client } = await kafka()
  await dataTopic(INPUT)
  await dataTopic(OUTPUT)
  const role = uniqueRole('eos-resume')
  const group = uniqueGroup('resume')
  const a = await client.acquireLeadership(role, 'a', SLOW)
  try {
    const asked = [{ topic: INPUT, partitions: [0] }]
    assert.deepEqual(await a.committedOffsets(group, asked), [
      { topic: INPUT, partition: 0, offset: null, metadata: null },
    ])
    await a.writeWithOffsets([out('r-0')], after(group, 1))
    // A bigint offset and metadata, as a pipeline keeps them.
    await a.writeWithOffsets([out('r-1'), out('r-2')], after(group, 3n, 'batch 2'))
    assert.deepEqual(await a.committedOffsets(group, asked), [
      { topic: INPUT, partition: 0, offset: 3n, metadata: 'batch 2' },
    ])
    await a.resign()
    // The same refusal after a resign as `write`'s, nothing sent.
    await assert.rejects(a.writeWithOffsets([], after(group, 4)), kc.ResignedError)

    const b = await client.acquireLeadership(role, 'b', SLOW)
    try {
      assert.ok(b.token.compare(a.token) > 0)
      assert.deepEqual(await b.committedOffsets(group, asked), [
        { topic: INPUT, partition: 0, offset: 3n, metadata: 'batch 2' },
      ])
    } finally {
      await b.resign()
    }
  } finally {
    if (a.isHeld) await a.resign()
  }
})

test("a deposed leader's write with offsets is fenced and moves no offset", async () => {
  const { client } = await kafka()
  await dataTopic(INPUT)
  await dataTopic(OUTPUT)
  const role = uniqueRole('eos-fenced')
  const group = uniqueGroup('fenced')
  const a = await client.acquireLeadership(role, 'a', SLOW)
  // Another role's leader reads the group after a's term ended.
  const reader = await client.acquireLeadership(uniqueRole('eos-reader'), 'r', SLOW)
  try {
    await a.writeWithOffsets([out('a-0')], after(group, 1, 'a-0'))
    await mintNewerEpoch(role)
    const e = await a.writeWithOffsets([out('a-1')], after(group, 2)).then(
      () => assert.fail('a deposed leader wrote with offsets'),
      (e) => e,
    )
    assert.ok(e instanceof kc.FencedError, `${e.name}: ${e.message}`)
    assert.equal(e.code, 'FENCED')
    assert.equal(a.isHeld, false, 'the fence ended the term')
    // Offsets alone are refused the same way.
    await assert.rejects(a.writeWithOffsets([], after(group, 5)), kc.FencedError)
    assert.deepEqual(await reader.committedOffsets(group, [{ topic: INPUT, partitions: [0] }]), [
      { topic: INPUT, partition: 0, offset: 1n, metadata: 'a-0' },
    ])
  } finally {
    await reader.resign()
    if (a.isHeld) await a.resign()
  }
})

test('bad offsets reject with an InvalidArgumentError naming the value, nothing sent', async () => {
  const { client } = await kafka()
  await dataTopic(INPUT)
  const role = uniqueRole('eos-bad')
  const group = uniqueGroup('bad')
  const a = await client.acquireLeadership(role, 'a', SLOW)
  try {
    const empty = await a.writeWithOffsets([out('x')], after('', 1)).then(assert.fail, (e) => e)
    assert.ok(empty instanceof kc.InvalidArgumentError, `${empty.name}: ${empty.message}`)
    assert.match(empty.message, /consumer group .* is empty/)

    const negative = await a.writeWithOffsets([out('x')], after(group, -1)).then(assert.fail, (e) => e)
    assert.ok(negative instanceof kc.InvalidArgumentError, `${negative.name}: ${negative.message}`)
    assert.match(negative.message, /-1/)
    assert.match(negative.message, new RegExp(INPUT))

    const twice = {
      group,
      offsets: [
        { topic: INPUT, partition: 0, offset: 1 },
        { topic: INPUT, partition: 0, offset: 2 },
      ],
    }
    await assert.rejects(a.writeWithOffsets([], twice), (e) => e instanceof kc.InvalidArgumentError && /named twice/.test(e.message))
    await assert.rejects(a.committedOffsets('', [{ topic: INPUT, partitions: [0] }]), kc.InvalidArgumentError)
    await assert.rejects(a.committedOffsets(group, [{ topic: INPUT, partitions: [-1] }]), kc.InvalidArgumentError)
    // The binding's own type checks: the same class, `field` naming the value.
    await assert.rejects(a.writeWithOffsets([], { group, offsets: [{ topic: INPUT, partition: 0, offset: '1' }] }), (e) => e instanceof kc.InvalidArgumentError && e.field === 'offset')
    await assert.rejects(a.writeWithOffsets([], { group }), (e) => e instanceof kc.InvalidArgumentError && e.field === 'offsets')
    // A signal aborted at the call: a CancelledError, nothing sent.
    await assert.rejects(a.writeWithOffsets([out('x')], after(group, 1), { signal: AbortSignal.abort() }), kc.CancelledError)

    assert.ok(a.isHeld, 'a refusal leaves the term held')
    assert.deepEqual(await a.committedOffsets(group, [{ topic: INPUT, partitions: [0] }]), [
      { topic: INPUT, partition: 0, offset: null, metadata: null },
    ])
  } finally {
    await a.resign()
  }
})
