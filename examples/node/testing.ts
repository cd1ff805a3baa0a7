// Type check of krabka-coordination/testing (tsc -p . in ci/node.sh): the
// kit's processes hold the package's own Client, instants are bigints and
// a guarded write's token is the package's FencingToken.
import { FencingToken, LeadershipStatus } from 'krabka-coordination'
import { GuardedWrite, TestCluster, TestProcess, TestProcessState } from 'krabka-coordination/testing'

export async function failover(): Promise<FencingToken> {
  const cluster = new TestCluster({ partitions: 4 })
  const a: TestProcess = cluster.process('a')
  const b = cluster.process('b')
  const first = await a.client.acquireLeadership('billing', 'a')
  await first.write('orders', Buffer.from('a-1'))
  const standby = b.client.acquireLeadership('billing', 'b')
  await cluster.settle()
  a.crash()
  const state: TestProcessState = a.state
  const next: bigint | null = await cluster.advanceToNextDeadline()
  await cluster.advance(60)
  const second = await standby
  const now: bigint = cluster.now
  const writes: GuardedWrite[] = cluster.guardedWrites()
  const value: Buffer | null = writes[0].value
  const status: LeadershipStatus = await cluster.describeLeadership('billing')
  console.log(state, next, now, value, status.authoritative(second.token))
  // @ts-expect-error durations are seconds as numbers
  await cluster.advance('60')
  return writes[0].token
}
