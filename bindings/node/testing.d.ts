// testing.d.ts of krabka-coordination/testing: leader code tested without
// Kafka. Written by hand (the JavaScript layer is lib/testing.js over the
// addon's internal _TestCluster); scripts/check-docs.js checks that every
// name carries a doc comment.

import { Client, FencingToken, LeadershipStatus } from './index'

/** Options of {@link TestCluster}'s constructor. */
export interface TestClusterOptions {
  /** The partition count of the state topic (default 16, at least 1). */
  partitions?: number
}

/** What a {@link TestProcess} is doing: `'running'`, `'cutOff'` (each call
 * fails as transient), `'paused'` (SIGSTOP) or `'crashed'` (SIGKILL). */
export type TestProcessState = 'running' | 'cutOff' | 'paused' | 'crashed'

/** One guarded write the test cluster committed. */
export interface GuardedWrite {
  /** Its place in the cluster's commit order (from 0, counting the state
   * topic's records too). */
  commit: number
  /** The topic. */
  topic: string
  /** The partition. */
  partition: number
  /** The offset in the partition. */
  offset: bigint
  /** The key (empty when the record had none). */
  key: Buffer
  /** The value; `null` for a tombstone. */
  value: Buffer | null
  /** The role whose term wrote it. */
  role: string
  /** The token of that term. */
  token: FencingToken
}

/**
 * One process of a {@link TestCluster}: a real {@link Client} on the
 * in-memory cluster and its clock, and the faults a test puts it through.
 * A paused process's pending promises settle once it is resumed. A
 * crashed process's client counts as closed: its pending promises (an
 * acquire, a write, an observer's next view, `lead`) reject at once with an
 * `InvalidArgumentError` ("the client is closed: its process crashed"), its
 * leadership's `done` settles with that error, and its `close` resolves at
 * once; nothing of it reaches the cluster.
 */
export declare class TestProcess {
  /** Not constructed directly: {@link TestCluster.process} makes one. */
  private constructor()
  /** The name given to {@link TestCluster.process}. */
  get name(): string
  /** What the process is doing now. */
  get state(): TestProcessState
  /** The process's client: every method works as on Kafka (the same object
   * each time; closing it closes the process's client for good). */
  get client(): Client
  /** Kills the process (SIGKILL): it neither renews nor resigns nor sends
   * anything again, for good; what it had pending rejects with the closed
   * error naming the crash (above). */
  crash(): void
  /** Stops the process (SIGSTOP): its calls and timers wait. Its clock goes
   * on, so on {@link TestProcess.resume} what came due fires at once and a
   * write it had in flight reaches the cluster, which fences it when another
   * member minted meanwhile. */
  pause(): void
  /** Resumes a paused process (SIGCONT); nothing for a crashed one. */
  resume(): void
  /** Cuts the process off: each of its calls fails as transient (its timers
   * run) until {@link TestProcess.heal}. */
  cutOff(): void
  /** Ends a cut. */
  heal(): void
  /** Makes each call of the process fail as transient for `seconds` of the
   * cluster's time from now; a negative or non-number `seconds` throws an
   * `InvalidArgumentError`. */
  failFor(seconds: number): void
}

/**
 * An in-memory cluster running the library's own election rules, with one
 * manual clock for all its processes: nothing waits on real time, the test
 * moves the clock. Durations are seconds, as everywhere in the package;
 * instants are epoch milliseconds as `bigint`s, as a lease's.
 */
export declare class TestCluster {
  /** A cluster whose clock starts at 2026-01-01T00:00:00Z. A `partitions`
   * below 1, or an unknown option, throws an `InvalidArgumentError`. */
  constructor(options?: TestClusterOptions)
  /** A new process on the cluster, named `name` (for the test's messages;
   * the member id is what an acquire is given). */
  process(name: string): TestProcess
  /** The cluster's wall time (epoch ms). */
  get now(): bigint
  /** Moves the clock forward by `seconds`, deadline by deadline, letting
   * every process act at each; resolves once they are quiet at the end. A
   * negative or non-number `seconds` rejects with an `InvalidArgumentError`. */
  advance(seconds: number): Promise<void>
  /** Moves the clock to the earliest deadline any process waits for and lets
   * them act; resolves with that instant, or `null` (the clock unmoved) when
   * nobody waits. */
  advanceToNextDeadline(): Promise<bigint | null>
  /** Resolves once the processes have nothing left to do at this instant. */
  settle(): Promise<void>
  /** Every guarded write the cluster committed (every topic but the state
   * topic), in commit order, each with its term's token. */
  guardedWrites(): GuardedWrite[]
  /** What consumer group `group` has committed for `topic`/`partition` (the
   * offset of the next record to read), as guarded writes with offsets
   * (`Leadership.writeWithOffsets`) committed it; `null` when nothing
   * was (a commit still pending does not count). An argument of the wrong type
   * or a `partition` out of the 32-bit range throws an
   * `InvalidArgumentError` naming it. */
  committedOffset(group: string, topic: string, partition: number): bigint | null
  /** What the role's transaction coordinator says now, asked by a process of
   * the cluster's own that no fault touches. */
  describeLeadership(role: string): Promise<LeadershipStatus>
  /** Sets the coordinator's current token of `role`, to test a producer id
   * rotation: the next member to take the role gets the next epoch of
   * `token`'s producer id or, when `token`'s epoch is exhausted (32766), a
   * new producer id of the cluster's own, which may be lower than
   * `token`'s. Set it before the role's first election, or between terms.
   * `token` is a `FencingToken` or its text (`'9000/32765'`). */
  setEpoch(role: string, token: FencingToken | string): void
}
