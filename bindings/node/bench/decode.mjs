// Decoding lease values: the package (the Rust core through napi-rs), one
// value per call (decodeLease) and a batch per call (decodeLeases), against
// a pure-JavaScript DataView decoder of the same layout, in one run of one
// process. See docs/benchmarks/node.md.
//
// The DataView decoder does the same work as the core: the version check,
// the string length check, strict UTF-8 (TextDecoder with fatal: true), a
// non-empty member, no trailing bytes; it returns an object with the same
// fields (bigint i64s, a token object). Both decoders are checked to agree
// before they are timed.
//
// Method: for each batch size N, a batch is N distinct lease values decoded
// in a loop; the two decoders take turns, ROUNDS rounds of about 200 ms
// each, and the best round's time per call is reported (a busy moment of the
// machine hits each alike). "decode" decodes only; "+fields" also reads
// every field (member, producer id, epoch, granted at, deadline).
//
//   node bench/decode.mjs            full run (a few minutes)
//   node bench/decode.mjs --short    CI: a few rounds, prints the table
import { createRequire } from 'node:module'

const kc = createRequire(import.meta.url)('../index.js')
const short = process.argv.includes('--short')
const ROUNDS = short ? 3 : 9
const ROUND_MS = short ? 40 : 200
const SIZES = [1, 10, 100, 1000, 10000]

const utf8 = new TextDecoder('utf-8', { fatal: true })

class FormatError extends Error {}

function decodeLeaseJs(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const len = bytes.byteLength
  if (len < 2) throw new FormatError('lease value: too short for version')
  if (view.getInt16(0) !== 0) throw new FormatError('lease value: unknown version')
  if (len < 4) throw new FormatError('lease value: too short for member length')
  const n = view.getInt16(2)
  if (n < 0) throw new FormatError('lease value: negative member length')
  if (len < 4 + n) throw new FormatError('lease value: too short for member')
  let member
  try {
    member = utf8.decode(bytes.subarray(4, 4 + n))
  } catch {
    throw new FormatError('lease value: member is not valid UTF-8')
  }
  if (member.length === 0) throw new FormatError('lease value: member must not be empty')
  let at = 4 + n
  if (len < at + 26) throw new FormatError('lease value: too short')
  const producerId = view.getBigInt64(at)
  const producerEpoch = view.getInt16(at + 8)
  const grantedAt = view.getBigInt64(at + 10)
  const deadline = view.getBigInt64(at + 18)
  at += 26
  if (at !== len) throw new FormatError('lease value: trailing bytes')
  return { member, token: { producerId, producerEpoch }, grantedAt, deadline }
}

function values(count, memberLength) {
  const out = []
  for (let i = 0; i < count; i++) {
    const member = `node-${i}-`.padEnd(memberLength, 'x')
    const lease = new kc.Lease(member, new kc.FencingToken(4001n + BigInt(i), i % 32000), 1767225600000n + BigInt(i), 1767225630000n + BigInt(i))
    out.push(kc.encodeLease(lease))
  }
  return out
}

function agree(batch) {
  const many = kc.decodeLeases(batch)
  if (many.length !== batch.length || many.some((l, i) => !l.equals(kc.decodeLease(batch[i])))) {
    throw new Error('decodeLeases and decodeLease disagree')
  }
  for (const b of batch) {
    const p = kc.decodeLease(b)
    const j = decodeLeaseJs(b)
    if (p.member !== j.member || p.token.producerId !== j.token.producerId || p.token.producerEpoch !== j.token.producerEpoch || p.grantedAt !== j.grantedAt || p.deadline !== j.deadline) {
      throw new Error('the decoders disagree')
    }
  }
  for (const bad of [Buffer.from('0000', 'hex'), Buffer.from('00000001ff' + '00'.repeat(26), 'hex')]) {
    let threw = 0
    try { kc.decodeLease(bad) } catch (e) { threw += e instanceof kc.FormatError }
    try { decodeLeaseJs(bad) } catch (e) { threw += e instanceof FormatError }
    if (threw !== 2) throw new Error('the decoders disagree on malformed bytes')
  }
}

let sink = 0
const fields = (l) => l.member.length + Number(l.token.producerEpoch) + Number(l.grantedAt & 1n) + Number(l.deadline & 1n) + Number(l.token.producerId & 1n)
// Each decodes a whole batch: value by value, or (the package's
// decodeLeases) in one call.
const decoders = {
  single: (batch, withFields) => {
    for (let i = 0; i < batch.length; i++) {
      const l = kc.decodeLease(batch[i])
      if (withFields) sink += fields(l)
    }
  },
  batch: (batch, withFields) => {
    const ls = kc.decodeLeases(batch)
    if (withFields) for (let i = 0; i < ls.length; i++) sink += fields(ls[i])
    else sink += ls.length
  },
  dataview: (batch, withFields) => {
    for (let i = 0; i < batch.length; i++) {
      const l = decodeLeaseJs(batch[i])
      if (withFields) sink += fields(l)
    }
  },
}
const NAMES = Object.keys(decoders)

// ns per value of one round: repeat the batch for about ROUND_MS.
function round(which, batch, withFields) {
  const decode = decoders[which]
  let calls = 0
  const start = process.hrtime.bigint()
  const until = start + BigInt(ROUND_MS) * 1_000_000n
  let now = start
  do {
    decode(batch, withFields)
    calls += batch.length
    now = process.hrtime.bigint()
  } while (now < until)
  return Number(now - start) / calls
}

function measure(batch, withFields) {
  const best = Object.fromEntries(NAMES.map((n) => [n, Infinity]))
  // Warm every decoder up (JIT) before timing.
  for (const n of NAMES) round(n, batch, withFields)
  for (let r = 0; r < ROUNDS; r++) {
    // Rotate the order, so a busy moment of the machine hits each alike.
    for (let k = 0; k < NAMES.length; k++) {
      const which = NAMES[(r + k) % NAMES.length]
      best[which] = Math.min(best[which], round(which, batch, withFields))
    }
  }
  return best
}

console.log(`node ${process.version}, ${ROUNDS} rounds of ~${ROUND_MS} ms, best round, ns per value`)
console.log('| member | batch | what | decodeLease ns | decodeLeases ns | DataView ns | decodeLease / DataView | decodeLeases / DataView |')
console.log('| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |')
for (const memberLength of [6, 200]) {
  const all = values(Math.max(...SIZES), memberLength)
  agree(all)
  for (const size of SIZES) {
    const batch = all.slice(0, size)
    for (const withFields of [false, true]) {
      const best = measure(batch, withFields)
      const r1 = best.single / best.dataview
      const rn = best.batch / best.dataview
      console.log(`| ${memberLength} chars | ${size} | ${withFields ? 'decode + fields' : 'decode'} | ${best.single.toFixed(0)} | ${best.batch.toFixed(0)} | ${best.dataview.toFixed(0)} | ${r1.toFixed(2)} | ${rn.toFixed(2)} |`)
    }
  }
}
if (sink === 0.5) console.log(sink)
