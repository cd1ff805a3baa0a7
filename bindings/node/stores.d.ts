// Types of krabka-coordination/stores: fenced writes to SQL stores
// (docs/fenced-stores.md) through `pg` and `better-sqlite3`, both optional
// peer dependencies. The connection types are structural, so neither
// driver's types are needed to compile against this file.

import { FencingToken, LeadershipStatus } from './index'

/** A `pg` `Client` or `PoolClient` (anything with pg's `query`). */
export interface PgConnection {
  /** pg's query: the fence runs its statements with `rowMode: 'array'`. */
  query(config: { text: string; values?: unknown[]; rowMode?: 'array' } | string): Promise<{ rows: unknown[] }>
}

/** A `better-sqlite3` `Database`. */
export interface SqliteDatabase {
  /** A prepared statement: the fence's statements run through it. */
  prepare(sql: string): unknown
  /** Runs a script: the migration. */
  exec(sql: string): unknown
  /** Whether a transaction is open (how the fence tells the driver). */
  readonly inTransaction: boolean
}

/** Creates the fence table (and, on PostgreSQL, the `krabka_fence` SQL
 * function) if missing: the SQL of `stores/sql/`. Run it once per database
 * before the first fenced write; running it again changes nothing. Rejects
 * with `FatalError` (or `TransientError`) for a database error, the
 * driver's error as its `cause`. */
export function migrate(conn: PgConnection | SqliteDatabase): Promise<void>

/** Checks `token` against the newest token of `role` that the store
 * accepted, and advances it, inside the transaction open on `conn`.
 *
 * Resolved, the token may write: the role's fence row holds it and stays
 * locked (PostgreSQL) or the database's write lock is held (SQLite) until
 * the transaction ends, so no transaction with another token of the role
 * commits in between, and the transaction commits its writes with the
 * advance or rolls both back. Call it inside the transaction before its
 * guarded writes (at least before its commit) and commit yourself. On
 * SQLite begin with `BEGIN IMMEDIATE` (or make this the first statement);
 * and let nothing else use the database while it is awaited.
 *
 * `describe` is called only when the stored token has another producer id
 * than `token` (a producer id rotation), and then while the row is locked:
 * pass `() => client.describeLeadership(role)`.
 *
 * Rejects with `FencedError` when the store accepted a newer token (or the
 * rotation is not the current token), naming the role and the tokens;
 * `InvalidArgumentError` for an invalid role, an unminted token or a
 * connection of no known driver; `TransientError` for a serialization
 * failure, a deadlock, a busy SQLite database or a lost connection (roll
 * back and retry the whole transaction); `FatalError` for any other database
 * error (a missing table: run `migrate`), the driver's error as `cause`;
 * and whatever `describe` rejects with. After any error, roll back. */
export function fence(
  conn: PgConnection | SqliteDatabase,
  role: string,
  token: FencingToken,
  describe: () => Promise<LeadershipStatus> | LeadershipStatus,
): Promise<void>
