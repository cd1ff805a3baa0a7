// The leadership events as a discriminated union, checked by `tsc --noEmit
// --strict` (ci/node.sh): `switch (event.kind)` narrows each case to its
// kind's own fields, a field of another kind does not compile there (each
// `@ts-expect-error` below fails the check if its line compiles), and the
// union is closed, so an exhaustive `never` check compiles. Not run.
import {
  type Client,
  type EventOfKind,
  type LeadershipEvent,
  type UnknownEvent,
  type Leadership,
  type KrabkaError,
  type FencingToken,
} from 'krabka-coordination'

export function describe(event: LeadershipEvent): string {
  switch (event.kind) {
    case 'registered': {
      const offset: bigint = event.offset
      const partition: number = event.partition
      // @ts-expect-error: a registration has no token
      void event.token
      return `registered at ${partition}/${offset}`
    }
    case 'waiting': {
      const rank: number = event.rank
      const holder: string | undefined = event.holder
      const token: FencingToken | undefined = event.token
      // @ts-expect-error: the holder's token may be absent
      const sure: FencingToken = event.token
      void sure
      return `waiting at rank ${rank} behind ${holder ?? 'nobody'} ${token}`
    }
    case 'elected': {
      const token: FencingToken = event.token
      const deadline: bigint = event.deadline
      const granted: bigint = event.grantedAt
      // @ts-expect-error: an election has no failures
      void event.failures
      return `elected ${token} ${granted}..${deadline}`
    }
    case 'renewed': {
      const deadline: bigint = event.deadline
      // @ts-expect-error: a renewal has no grantedAt
      void event.grantedAt
      return `renewed to ${deadline}`
    }
    case 'renewal_failing': {
      const error: KrabkaError = event.error
      return `${event.failures} failures: ${error.code}`
    }
    case 'retrying':
      return `${event.what} failed ${event.attempt} times; again in ${event.retryIn} s: ${event.error.message}`
    case 'fenced':
    case 'ended':
      // Narrowed to the two kinds: both carry the error.
      return `${event.kind}: ${event.error.code}`
    case 'resigned': {
      const cleared: boolean = event.cleared
      // @ts-expect-error: a resign has no error
      void event.error
      return cleared ? 'resigned, lease cleared' : 'resigned'
    }
    case 'lost_challenge':
      return `lost with ${event.token}`
    case 'held_back':
    case 'challenging':
    case 'write_resolved':
    case 'lease_expired':
    case 'deregistered':
      return event.kind
    default: {
      // Every kind is handled: a kind a later version adds fails here.
      const unhandled: never = event
      // An addon newer than these typings: the event as an UnknownEvent.
      const other = unhandled as UnknownEvent
      return `${other.kind} of ${other.role}`
    }
  }
}

export function kinds(leadership: Leadership, client: Client): void {
  // A listener of one kind gets that kind's event.
  leadership.on('fenced', (e) => void e.error.code)
  leadership.once('elected', (e: EventOfKind<'elected'>) => void e.token.producerEpoch)
  // @ts-expect-error: not a kind
  leadership.on('promoted', () => {})
  // @ts-expect-error: a renewal listener gets no error
  leadership.on('renewed', (e) => void e.error)
  // An equality test narrows as a switch does.
  void client.acquireLeadership('billing', 'host-a', {
    onEvent: (e) => {
      if (e.kind === 'waiting' && e.holder !== undefined) void e.holder.toUpperCase()
      // @ts-expect-error: not narrowed, so no deadline
      void e.deadline
    },
  })
}

export async function signals(client: Client, leadership: Leadership): Promise<void> {
  const signal = AbortSignal.timeout(5_000)
  await client.describeLeadership('billing', { signal })
  await client.describeRoleState('billing', { signal })
  await client.checkStateTopic({ signal })
  await client.ensureStateTopic({ development: true, signal })
  await leadership.write('billing-out', null, { signal })
  await leadership.writeRecords([{ topic: 'billing-out', value: null }], { signal })
  await leadership.resign({ signal })
  await leadership[Symbol.asyncDispose]()
  await client[Symbol.asyncDispose]()
  // @ts-expect-error: a signal, not a number of seconds
  await client.describeLeadership('billing', { signal: 5 })
}
