// A service that does a role's work only while it leads.
//
// It acquires the role (waiting as a standby while another member leads),
// then writes one result every --interval seconds through guarded writes:
// a write of a deposed leader is refused by the broker, so a result is
// never written by two members. It stops its work when the term ends
// (fenced, lease expired) and exits cleanly on SIGINT/SIGTERM: a waiting
// acquire is aborted (the member deregisters), a held role is resigned (a
// standby takes over at once), the client is closed, and the process exits
// because nothing is left on the event loop.
//
//   node examples/node/service.mjs --bootstrap 127.0.0.1:19092 --role nightly-report \
//        --member host-a --topic report-results
//
// Exit codes: 0 stopped by a signal, 3 fenced, 4 the lease expired, 1 other errors.
import { parseArgs } from 'node:util'
import { Client, FencedError, LeaseExpiredError, CancelledError } from 'krabka-coordination'

const { values: a } = parseArgs({
  options: {
    bootstrap: { type: 'string', default: '127.0.0.1:19092' },
    role: { type: 'string', default: 'nightly-report' },
    member: { type: 'string', default: `host-${process.pid}` },
    topic: { type: 'string', default: 'report-results' },
    interval: { type: 'string', default: '1' },
    lease: { type: 'string', default: '30' },
    renew: { type: 'string', default: '10' },
    stagger: { type: 'string', default: '5' },
    'for-seconds': { type: 'string' }, // stop with SIGTERM after this long (CI)
  },
})

const log = (...args) => console.log(new Date().toISOString(), ...args)

// One client per process, shared by every role it takes or asks about.
const client = new Client({ 'bootstrap.servers': a.bootstrap, 'client.id': `service-${a.member}` })
const stopping = new AbortController()
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    log(`${signal}: stopping`)
    stopping.abort(signal)
  })
}
if (a['for-seconds']) setTimeout(() => process.kill(process.pid, 'SIGTERM'), Number(a['for-seconds']) * 1000).unref()

async function lead(leadership) {
  log(`leading ${a.role} as ${a.member} with token ${leadership.token}`)
  leadership.on('renewal_failing', (e) => log(`renewal failing (${e.failures} in a row): ${e.error?.message}`))
  let seq = 0
  const ended = leadership.done
  const stopped = new Promise((resolve) => stopping.signal.addEventListener('abort', resolve, { once: true }))
  while (leadership.isHeld && !stopping.signal.aborted) {
    // The role's work; its output goes through a guarded write.
    const result = JSON.stringify({ member: a.member, token: String(leadership.token), seq, at: Date.now() })
    await leadership.write(a.topic, Buffer.from(result), { key: Buffer.from(a.role) })
    log(`result ${seq} written`)
    seq += 1
    await Promise.race([ended, stopped, new Promise((r) => setTimeout(r, Number(a.interval) * 1000))])
  }
  if (stopping.signal.aborted) {
    await leadership.resign()
    log(`${stopping.signal.reason}: resigned`)
    return 0
  }
  throw leadership.error
}

async function main() {
  let leadership
  try {
    leadership = await client.acquireLeadership(a.role, a.member, {
      leaseDuration: Number(a.lease),
      renewInterval: Number(a.renew),
      challengeStagger: Number(a.stagger),
      signal: stopping.signal,
    })
  } catch (e) {
    if (e instanceof CancelledError) {
      log('stopped while waiting for the role (deregistered)')
      return 0
    }
    throw e
  }
  try {
    return await lead(leadership)
  } catch (e) {
    // The term is over: stop the role's work, including work outside Kafka.
    if (e instanceof FencedError) {
      log(`fenced, stopping: ${e.message}`)
      return 3
    }
    if (e instanceof LeaseExpiredError) {
      log(`lease expired, stopping: ${e.message}`)
      return 4
    }
    throw e
  } finally {
    await leadership.resign().catch(() => {}) // idempotent; deregisters after a fence
  }
}

main()
  .then((code) => (process.exitCode = code))
  .catch((e) => {
    log(`failed: ${e.code ?? ''} ${e.message}`)
    process.exitCode = 1
  })
  .finally(() => client.close())
