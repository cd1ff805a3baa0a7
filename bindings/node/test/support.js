'use strict'
// What the leadership tests need around a real Kafka: the cluster (from
// KRABKA_BOOTSTRAP: a test fails loudly when it is unset or the cluster
// cannot be reached, never skips), a topic for guarded writes, unique role
// names, Kafka's own tools, and member processes to start and kill.

const assert = require('node:assert/strict')
const { spawn, execFile } = require('node:child_process')
const path = require('node:path')
const crypto = require('node:crypto')
const kc = require('..')

const REPO = path.resolve(__dirname, '../../..')
// KRABKA_KAFKA_SH: the repository's ci/kafka.sh when the tests run from a
// copy (ci/release-check.sh runs them against the installed package).
const KAFKA_SH = process.env.KRABKA_KAFKA_SH ?? path.join(REPO, 'ci', 'kafka.sh')
const MEMBER = path.join(__dirname, 'member.js')

// A 3 s lease renewed every second, one second between challenger ranks.
const FAST = { leaseDuration: 3, renewInterval: 1, challengeStagger: 1 }

let shared

function bootstrap() {
  const b = process.env.KRABKA_BOOTSTRAP
  if (!b) {
    throw new Error(
      'KRABKA_BOOTSTRAP is not set: the leadership tests need a real Kafka (ci/kafka.sh start 1 prints its address; ci/node.sh starts it)',
    )
  }
  return b
}

/** The settings of the test cluster, checked once: the state topic is
 * created or checked (the development shape of a one-node cluster). */
async function kafka() {
  if (!shared) {
    const settings = { 'bootstrap.servers': bootstrap() }
    const client = new kc.Client(settings, { connectTimeout: 15 })
    try {
      await client.ensureStateTopic({ development: true })
    } catch (e) {
      throw new Error(`Kafka at ${settings['bootstrap.servers']} cannot be reached or used: ${e.message}`, { cause: e })
    }
    shared = { settings, client }
  }
  return shared
}

function closeShared() {
  shared?.client.close()
}

function uniqueRole(name) {
  return `node-${name.replace(/[^A-Za-z0-9]+/g, '-').slice(0, 40)}-${crypto.randomBytes(5).toString('hex')}`
}

function tool(...args) {
  return new Promise((resolve, reject) => {
    execFile('bash', [KAFKA_SH, 'tool', ...args], { timeout: 120_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`ci/kafka.sh tool ${args.join(' ')} failed: ${stderr.slice(-2000)}`, { cause: err }))
      else resolve(stdout)
    })
  })
}

const topics = new Map()
/** A topic of one partition for guarded writes, made with Kafka's own tool. */
async function dataTopic(name) {
  if (!topics.has(name)) {
    topics.set(name, tool('topics', '--bootstrap-server', bootstrap(), '--create', '--if-not-exists', '--topic', name, '--partitions', '1', '--replication-factor', '1'))
  }
  await topics.get(name)
  return name
}

/** Has another process (Kafka's admin tool) mint a newer epoch of `role`. */
function mintNewerEpoch(role) {
  return tool('transactions', '--bootstrap-server', bootstrap(), 'forceTerminateTransaction', '--transactionalId', role)
}

async function members(role) {
  const { client } = await kafka()
  return (await client.describeRoleState(role)).members
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function waitUntil(probe, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const v = await probe()
    if (v) return v
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(100)
  }
}

/** A member process (member.js): JSON events on stdout. */
class Member {
  constructor(role, member, ...args) {
    this.member = member
    this.seen = []
    this.waiters = []
    this.stderr = ''
    this.proc = spawn(process.execPath, [MEMBER, '--bootstrap', bootstrap(), '--role', role, '--member', member, ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, signal) => resolve({ code, signal, at: Date.now() })))
    let buf = ''
    this.proc.stdout.on('data', (chunk) => {
      buf += chunk
      let i
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i)
        buf = buf.slice(i + 1)
        let event
        try {
          event = JSON.parse(line)
        } catch {
          this.stderr += `[stdout] ${line}\n`
          continue
        }
        event.rx = Date.now()
        this.seen.push(event)
        this.waiters = this.waiters.filter((w) => !w(event))
      }
    })
    this.proc.stderr.on('data', (chunk) => (this.stderr += chunk))
  }

  /** The first event named one of `names` from `from` on, within `timeoutMs`. */
  expect(names, timeoutMs, from = 0) {
    names = [].concat(names)
    const found = this.seen.slice(from).find((e) => names.includes(e.event))
    if (found) return Promise.resolve(found)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`${this.member}: no ${names.join(' or ')} within ${timeoutMs} ms; events: ${JSON.stringify(this.seen.map((e) => e.event))}; stderr: ${this.stderr.slice(-3000)}`))
      }, timeoutMs)
      this.waiters.push((e) => {
        if (!names.includes(e.event)) return false
        clearTimeout(timer)
        resolve(e)
        return true
      })
    })
  }

  send(line) {
    this.proc.stdin.write(line + '\n')
  }

  kill(signal = 'SIGKILL') {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill(signal)
  }
}

const tokenOf = (e) => new kc.FencingToken(BigInt(e.token[0]), e.token[1])

module.exports = { FAST, kafka, closeShared, uniqueRole, dataTopic, mintNewerEpoch, members, waitUntil, sleep, Member, tokenOf, bootstrap }
