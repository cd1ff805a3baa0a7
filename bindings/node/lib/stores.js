'use strict'
// krabka-coordination/stores: the fence of SQL stores (docs/fenced-stores.md)
// for `pg` and `better-sqlite3`. The SQL and every decision come from the
// Rust crate krabka-coordination-stores through the addon (`_fence*`); this
// file only runs its statements through the caller's driver. No driver is
// required here: the caller passes its own connection.

const STORE_NAMES = { postgres: 'PostgreSQL', sqlite: 'SQLite' }
const PLACEHOLDER = /[$?](\d+)/g

function makeStores(kc) {
  // The dialect of a connection: a better-sqlite3 Database (prepare, exec,
  // inTransaction) or a pg Client / PoolClient (query).
  function storeOf(conn) {
    if (conn && typeof conn.prepare === 'function' && typeof conn.exec === 'function' && 'inTransaction' in conn) {
      return 'sqlite'
    }
    if (conn && typeof conn.query === 'function') return 'postgres'
    const what = conn === null ? 'null' : typeof conn === 'object' ? conn.constructor?.name ?? 'object' : typeof conn
    const e = new kc.InvalidArgumentError(
      `the fence needs a pg Client or PoolClient, or a better-sqlite3 Database, got ${what}`,
    )
    throw e
  }

  // A driver's failure as the core's TransientError or FatalError (its
  // message naming the step, the role and the store), the driver's error as
  // `cause`.
  function dbError(store, what, role, e) {
    const err = kc._fenceError(what, role, STORE_NAMES[store], transient(store, e), String(e?.message ?? e))
    Object.defineProperty(err, 'cause', { value: e, configurable: true, writable: true })
    return err
  }

  // Whether a new transaction may pass where this one failed: a
  // serialization failure or deadlock (SQLSTATE 40001, 40P01), a lost
  // connection, a busy or locked SQLite database.
  function transient(store, e) {
    const code = String(e?.code ?? '')
    if (store === 'sqlite') return code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')
    if (code === '40001' || code === '40P01') return true
    return ['ECONNRESET', 'EPIPE', 'ECONNREFUSED'].includes(code) || /Connection terminated/i.test(String(e?.message))
  }

  // One statement through the driver: the first row as an array, or null.
  async function run(conn, store, what, role, sql, args) {
    try {
      if (store === 'postgres') {
        const result = await conn.query({ text: sql, values: args, rowMode: 'array' })
        return result.rows?.[0] ?? null
      }
      // better-sqlite3 binds `?` positionally (not `?1`): the statement's
      // numbered parameters in order.
      const order = []
      const text = sql.replace(PLACEHOLDER, (_, n) => {
        order.push(Number(n))
        return '?'
      })
      const stmt = conn.prepare(text)
      const bound = order.map((n) => args[n - 1])
      if (!stmt.reader) {
        stmt.run(...bound)
        return null
      }
      return stmt.raw(true).get(...bound) ?? null
    } catch (e) {
      throw dbError(store, what, role, e)
    }
  }

  async function migrate(conn) {
    const store = storeOf(conn)
    const [migration] = kc._fenceSql(store)
    try {
      if (store === 'postgres') await conn.query(migration)
      else conn.exec(migration)
    } catch (e) {
      throw dbError(store, 'migrate', '(all roles)', e)
    }
  }

  async function fence(conn, role, token, describe) {
    const store = storeOf(conn)
    kc._fenceCheck(role, token)
    if (typeof describe !== 'function') {
      throw new TypeError(`describe must be a function returning the role's LeadershipStatus, got ${typeof describe}`)
    }
    const [, advance, read, rotate] = kc._fenceSql(store)
    const args = [role, token.producerId, token.producerEpoch]
    if ((await run(conn, store, 'fence', role, advance, args)) !== null) return
    const row = await run(conn, store, 'fence (read)', role, read, [role])
    const stored = new kc.FencingToken(BigInt(row[0]), Number(row[1]))
    kc._fenceVerdict(role, stored, token) // throws FencedError when older
    const status = await describe()
    kc._fenceProven(role, stored, token, status.token)
    await run(conn, store, 'fence (rotate)', role, rotate, args)
  }

  return { fence, migrate }
}

module.exports = { makeStores }
