// Many roles held by one Node.js process: one Client
// acquires N roles at once (Promise.all), holds them, and resigns them,
// while the process samples its threads, open descriptors, TCP sockets and
// resident memory every second (/proc/self) and times its renewals from the
// leaderships' events. The twins are examples/rust/benches/roles.rs
// (ci/bench-roles.sh) and bindings/python/bench/bench_roles.py; the numbers
// of all three are in docs/benchmarks/scale.md.
//
//   node bench/roles.mjs --bootstrap HOST:PORT[,...] [--roles 1000]
//       [--hold-s 120] [--lease-s 10] [--renew-s 3] [--acquire-within-s 120] [--state-topic NAME]
//       [--json PATH]
//
// Like the Rust twin, each run makes a state topic of its own (replication
// factor 3, min.insync.replicas 2) unless --state-topic names one: a new
// member reads its partition from the start, so a topic shared by earlier
// runs would time their history too.
//
// Prints one line per role count; exits 1 when a renewal failed or a role
// was lost.
import { createRequire } from 'node:module'
import { appendFileSync, readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { parseArgs } from 'node:util'

const kc = createRequire(import.meta.url)('../index.js')

/** Threads, descriptors, sockets and resident MiB of this process. */
function sample() {
  const status = readFileSync('/proc/self/status', 'utf8')
  const field = (name) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)[1])
  let fds = 0
  let sockets = 0
  for (const fd of readdirSync('/proc/self/fd')) {
    fds++
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith('socket:')) sockets++
    } catch {
      // closed meanwhile
    }
  }
  return { threads: field('Threads'), fds, sockets, rss_mib: field('VmRSS') / 1024 }
}

/** The q-quantile (nearest rank) of `values`, NaN when empty. */
function quantile(values, q) {
  if (values.length === 0) return NaN
  const s = [...values].sort((a, b) => a - b)
  return s[Math.max(1, Math.min(s.length, Math.ceil(q * s.length))) - 1]
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function runOne(args, client, n) {
  const base = `bench-roles-node-${Date.now()}-${n}`
  const renewMs = args.renewS * 1000
  const late = []
  const before = sample()
  const t0 = performance.now()
  // A run whose roles are not all acquired in time fails (CancelledError).
  const acquireSignal = AbortSignal.timeout(args.acquireWithinS * 1000)
  const held = await Promise.all(
    Array.from({ length: n }, (_, i) => {
      // How late each renewal came: its grant time (deadline minus the
      // lease) against the previous grant plus the renew interval.
      let previous = null
      let leaseMs = null
      return client.acquireLeadership(`${base}-${i}`, 'holder', {
        leaseDuration: args.leaseS,
        renewInterval: args.renewS,
        signal: acquireSignal,
        onEvent(event) {
          if (event.kind === 'elected') {
            previous = Number(event.grantedAt)
            leaseMs = Number(event.deadline) - previous
          } else if (event.kind === 'renewed' && previous !== null) {
            const granted = Number(event.deadline) - leaseMs
            late.push(Number(event.at) - (previous + renewMs))
            previous = granted
          }
        },
      })
    }),
  )
  const acquired = (performance.now() - t0) / 1000
  console.error(`bench-roles: ${n} acquired in ${acquired.toFixed(2)} s`)
  const peak = { ...before }
  const until = performance.now() + args.holdS * 1000
  while (performance.now() < until) {
    await sleep(1000)
    const s = sample()
    for (const k of Object.keys(peak)) peak[k] = Math.max(peak[k], s[k])
  }
  const failures = held.reduce((sum, l) => sum + l.renewalFailures, 0)
  const lost = held.filter((l) => !l.isHeld).length
  const t1 = performance.now()
  const resigned = await Promise.allSettled(held.map((l) => l.resign()))
  const resignErrors = resigned.filter((r) => r.status === 'rejected').length
  const resignAll = (performance.now() - t1) / 1000
  const result = {
    roles: n,
    acquire_all_s: acquired,
    hold_s: args.holdS,
    before,
    peak,
    renewals: late.length,
    renewal_late_ms: { p50: quantile(late, 0.5), p99: quantile(late, 0.99), max: quantile(late, 1) },
    renewal_failures: failures,
    roles_lost: lost,
    resign_all_s: resignAll,
    resign_errors: resignErrors,
  }
  console.log(
    `${String(n).padStart(5)} roles (Node ${process.version}): acquired in ${acquired.toFixed(2)} s | ` +
      `peak ${peak.threads} threads, ${peak.fds} fds, ${peak.sockets} sockets, ${peak.rss_mib.toFixed(1)} MiB | ` +
      `${late.length} renewals, late p50 ${quantile(late, 0.5).toFixed(0)} ms p99 ${quantile(late, 0.99).toFixed(0)} ms ` +
      `max ${quantile(late, 1).toFixed(0)} ms | ${failures} failures, ${lost} lost | ` +
      `resigned in ${resignAll.toFixed(2)} s (${resignErrors} errors)`,
  )
  return result
}

async function main() {
  const { values } = parseArgs({
    options: {
      bootstrap: { type: 'string', default: process.env.KRABKA_BOOTSTRAP_3 ?? '' },
      roles: { type: 'string', default: '1000' },
      'hold-s': { type: 'string', default: '120' },
      'lease-s': { type: 'string', default: '10' },
      'renew-s': { type: 'string', default: '3' },
      'acquire-within-s': { type: 'string', default: '120' },
      'state-topic': { type: 'string' },
      json: { type: 'string' },
    },
  })
  if (!values.bootstrap) {
    console.error('bench-roles: --bootstrap (or KRABKA_BOOTSTRAP_3) is required')
    return 2
  }
  const args = {
    holdS: Number(values['hold-s']),
    leaseS: Number(values['lease-s']),
    renewS: Number(values['renew-s']),
    acquireWithinS: Number(values['acquire-within-s']),
  }
  const counts = values.roles.split(',').map(Number)
  console.error(`node ${process.version}, kafka ${values.bootstrap}`)
  const stateTopic = values['state-topic'] ?? `krabka-bench-roles-node-${Date.now()}`
  console.error(`bench-roles: state topic ${stateTopic}`)
  const client = new kc.Client({ 'bootstrap.servers': values.bootstrap }, { stateTopic })
  let ok = true
  try {
    await client.ensureStateTopic() // replication factor 3, min ISR 2
    for (const n of counts) {
      const r = await runOne(args, client, n)
      ok = ok && r.renewal_failures === 0 && r.roles_lost === 0
      if (values.json) {
        const line = { t_ms: Date.now(), bootstrap: values.bootstrap, node: process.version, result: r }
        appendFileSync(values.json, JSON.stringify(line) + '\n')
      }
      await sleep(3000)
    }
  } finally {
    client.close()
  }
  return ok ? 0 : 1
}

process.exitCode = await main()
