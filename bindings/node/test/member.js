'use strict'
// A member process for the leadership tests (started by support.js).
//
// It acquires the role, then, while it leads, makes a guarded write to
// --topic every --write-every seconds (0: only on a `write` line on stdin).
// Every step is a JSON line on stdout: start, elected (token), wrote (seq),
// write_failed (code, name), ended (code), exited; the core's events are
// relayed as core.<kind>. `resign` on stdin resigns. With --exit-after-resign
// it resigns at once after winning and closes the client, leaving the event
// loop empty: the process must then exit by itself. With --lead it runs
// client.lead instead: each term's work emits term (token, number), waits
// for the term's signal and emits term_ended; SIGTERM stops the loop and
// the process emits lead_done. With --close-on-stdin a `close` line on
// stdin closes the client, whatever it is doing (acquiring, holding): the
// process emits acquire_cancelled if its acquire was cancelled, closed once
// close() resolved, exited at exit, and must then exit by itself.

const kc = require('..')
const { parseArgs } = require('node:util')
const readline = require('node:readline')

const { values: a } = parseArgs({
  options: {
    bootstrap: { type: 'string' },
    role: { type: 'string' },
    member: { type: 'string' },
    lease: { type: 'string', default: '3' },
    renew: { type: 'string', default: '1' },
    stagger: { type: 'string', default: '1' },
    topic: { type: 'string' },
    'write-every': { type: 'string', default: '0.2' },
    'exit-after-resign': { type: 'boolean', default: false },
    lead: { type: 'boolean', default: false },
    'close-on-stdin': { type: 'boolean', default: false },
  },
})

const emit = (event, fields = {}) =>
  process.stdout.write(JSON.stringify({ event, t: Date.now(), ...fields }, (_, v) => (typeof v === 'bigint' ? v.toString() : v)) + '\n')
const tokenOf = (t) => [t.producerId.toString(), t.producerEpoch]

async function lead() {
  const client = new kc.Client({ 'bootstrap.servers': a.bootstrap })
  const stop = new AbortController()
  process.on('SIGTERM', () => stop.abort())
  emit('start')
  const timings = { leaseDuration: Number(a.lease), renewInterval: Number(a.renew), challengeStagger: Number(a.stagger) }
  let number = 0
  await client.lead(
    a.role,
    a.member,
    async (leadership, signal) => {
      emit('term', { token: tokenOf(leadership.token), number: ++number })
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
      emit('term_ended', { number })
    },
    { ...timings, signal: stop.signal },
  )
  emit('lead_done')
  client.close()
}

async function closeOnStdin() {
  const client = new kc.Client({ 'bootstrap.servers': a.bootstrap })
  const lines = readline.createInterface({ input: process.stdin })
  lines.on('line', async (line) => {
    if (line !== 'close') return
    // Let go of stdin, which would keep the process alive on its own.
    lines.close()
    process.stdin.destroy()
    await client.close()
    emit('closed')
    process.on('exit', () => emit('exited'))
  })
  emit('start')
  try {
    const leadership = await client.acquireLeadership(a.role, a.member, {
      leaseDuration: Number(a.lease),
      renewInterval: Number(a.renew),
      challengeStagger: Number(a.stagger),
    })
    emit('elected', { token: tokenOf(leadership.token) })
  } catch (e) {
    if (!(e instanceof kc.CancelledError)) throw e
    emit('acquire_cancelled', { code: e.code })
  }
}

async function main() {
  if (a.lead) return lead()
  if (a['close-on-stdin']) return closeOnStdin()
  const client = new kc.Client({ 'bootstrap.servers': a.bootstrap })
  emit('start')
  const leadership = await client.acquireLeadership(a.role, a.member, {
    leaseDuration: Number(a.lease),
    renewInterval: Number(a.renew),
    challengeStagger: Number(a.stagger),
  })
  emit('elected', { token: tokenOf(leadership.token), deadline: leadership.lease.deadline })
  if (a['exit-after-resign']) {
    await leadership.resign()
    client.close()
    emit('resigned', { code: leadership.error?.code })
    process.on('exit', () => emit('exited'))
    return
  }
  leadership.on('event', (e) => emit(`core.${e.kind}`, { error: e.error?.code, deadline: e.deadline }))
  let seq = 0
  const write = async () => {
    try {
      await leadership.write(a.topic, Buffer.from(JSON.stringify({ member: a.member, seq })), { key: Buffer.from(a.role) })
      emit('wrote', { seq: seq++ })
      return true
    } catch (e) {
      emit('write_failed', { code: e.code, name: e.name, message: e.message, held: leadership.isHeld })
      return false
    }
  }
  const lines = readline.createInterface({ input: process.stdin })
  lines.on('line', async (line) => {
    if (line === 'write') await write()
    if (line === 'resign') await leadership.resign()
  })
  const every = Number(a['write-every']) * 1000
  if (a.topic && every > 0) {
    const timer = setInterval(async () => {
      if (!(await write())) clearInterval(timer)
    }, every)
    leadership.done.then(() => clearInterval(timer))
  }
  const reason = await leadership.done
  emit('ended', { code: reason?.code })
  lines.close()
  client.close()
}

main().catch((e) => {
  emit('failed', { code: e.code, name: e.name, message: e.message })
  process.exitCode = 1
})
