// A small typed use of the package, checked by `tsc --noEmit` against the
// shipped index.d.ts (ci/node.sh). It is not run.
import {
  Client,
  FencingToken,
  FencedError,
  Key,
  Lease,
  Leadership,
  LeadershipEvent,
  NO_EPOCH,
  Observer,
  type RoleView,
  type RoleViewChange,
  decodeLease,
  encodeKey,
  encodeLease,
  rolePartition,
  type KrabkaError,
  type LeadOptions,
  type LeaderWork,
  type LogRecord,
  type LogLevel,
  getLogLevel,
  logger,
  setLogLevel,
  metrics,
  metricsText,
  registerMetrics,
  type KrabkaPromMetric,
  type MetricSample,
  type OAuthToken,
  type CommittedOffset,
  type ConsumedOffsets,
} from 'krabka-coordination'
import * as promClient from 'prom-client'

export async function serve(bootstrap: string, signal: AbortSignal): Promise<FencingToken> {
  const client = new Client({ 'bootstrap.servers': bootstrap, 'socket.timeout.ms': 10_000 }, { connectTimeout: 5 })
  await client.ensureStateTopic({ development: true })
  const leadership: Leadership = await client.acquireLeadership('billing', 'host-a', {
    leaseDuration: 30,
    renewInterval: 10,
    signal,
  })
  leadership.on('renewed', (e) => {
    const deadline: bigint = e.deadline
    void deadline
  })
  leadership.on('event', (e: LeadershipEvent) => void e.kind)
  try {
    await leadership.write('billing-out', Buffer.from('result'), { key: new Uint8Array([1]) })
    await leadership.writeRecords([{ topic: 'billing-out', value: null, headers: [['h', Buffer.from('v')]] }])
    const [from]: CommittedOffset[] = await leadership.committedOffsets('billing-in', [{ topic: 'orders', partitions: [0] }], { signal })
    const next: bigint = (from?.offset ?? 0n) + 1n
    const input: ConsumedOffsets = { group: 'billing-in', offsets: [{ topic: 'orders', partition: 0, offset: next, metadata: null }] }
    await leadership.writeWithOffsets([{ topic: 'billing-out', value: Buffer.from('result') }], input, { signal })
  } catch (e) {
    if (e instanceof FencedError) {
      const code: 'FENCED' = e.code
      void code
    }
  }
  for await (const event of leadership) {
    if (event.kind === 'fenced') break
  }
  const status = await client.describeLeadership('billing')
  const authoritative: boolean = status.authoritative(leadership.token)
  void authoritative
  const report = await client.describeRoleState('billing')
  const first: bigint | undefined = report.roster[0]?.offset
  void first
  await leadership.resign()
  const reason: KrabkaError = await leadership.done
  void reason
  await client.close()
  return leadership.token
}

export async function watch(bootstrap: string, signal: AbortSignal): Promise<FencingToken | null> {
  const client = new Client({ 'bootstrap.servers': bootstrap })
  const observer: Observer = client.observe(['billing', 'orders'], { renewals: true, signal })
  const roles: string[] = observer.roles
  void roles
  let last: FencingToken | null = null
  for await (const view of observer) {
    const change: RoleViewChange = view.change
    const leader: Lease | null = view.leader
    const position: bigint = view.position
    const ranked: string[] = view.roster.map((e) => e.member)
    void position
    void ranked
    if (change === 'elected' && leader !== null) last = leader.token
    if (change === 'lapsed' && view.lapsed !== null) break
  }
  const emitting = client.observe('billing')
  emitting.on('view', (v: RoleView) => void v.at)
  emitting.on('error', (e: KrabkaError) => void e.code)
  emitting.once('close', () => client.close())
  await emitting[Symbol.asyncDispose]()
  await client.acquireLeadership('billing', 'host-b', {
    onEvent: (e: LeadershipEvent) => {
      if (e.kind === 'waiting') void [e.holder, e.token]
    },
  })
  return last
}

export async function leadForever(bootstrap: string, signal: AbortSignal): Promise<void> {
  const client = new Client({ 'bootstrap.servers': bootstrap })
  const work: LeaderWork = async (leadership: Leadership, ended: AbortSignal) => {
    while (!ended.aborted) {
      await leadership.write('billing-out', Buffer.from(leadership.token.toString()))
      await new Promise((r) => setTimeout(r, 1000))
    }
  }
  const options: LeadOptions = { leaseDuration: 3, renewInterval: 1, signal, onEvent: (e) => void e.kind }
  const done: Promise<void> = client.lead('billing', 'host-c', work, options)
  await done
  const closing: Promise<void> = client.close() // ends whatever the client still runs
  await closing
}

const token = new FencingToken(4001n, 7)
const lease = new Lease('node-1', token, 1767225600000n, 1767225630000n)
const bytes: Buffer = encodeLease(lease)
const back: Lease = decodeLease(bytes)
const newer: -1 | 0 | 1 = back.token.compare(NO_EPOCH)
const partition: number = rolePartition('orders', 16)
const key: Buffer = encodeKey(Key.lease('orders'))
export { newer, partition, key }

const quiet: LogLevel = 'error'
setLogLevel(getLogLevel() === 'warn' ? 'info' : quiet)
logger.on('log', (r: LogRecord) => {
  const member: string | undefined = r.context.member
  const line: number | undefined = r.line
  void [r.level, r.target, r.text, r.fields.error, member, line]
})

const samples: MetricSample[] = metrics()
for (const s of samples) {
  if (s.kind === 'histogram') void [s.count, s.sum, s.buckets[0]?.[0]]
  else void (s.value + 1)
}
const prometheus: string = metricsText()
export { prometheus }

// The core's metrics in the application's own prom-client registry: the
// real module and Registry type-check against the declared parameters.
const registry = new promClient.Registry()
const registered: KrabkaPromMetric[] = registerMetrics(promClient, registry)
registerMetrics(promClient)
export async function scrape(): Promise<string> {
  void registered.map((m) => [m.name, m.help, m.type, m.labelNames])
  return registry.metrics()
}

export function securedClient(bootstrap: string, fetchToken: () => Promise<string>): Client {
  return new Client(
    { 'bootstrap.servers': bootstrap, 'security.protocol': 'SASL_SSL', 'sasl.mechanism': 'OAUTHBEARER' },
    {
      oauthToken: async (): Promise<OAuthToken> => ({ token: await fetchToken(), expiresAt: Date.now() + 3600_000, principal: 'billing' }),
    },
  )
}
