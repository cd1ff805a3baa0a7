'use strict'
// krabka-coordination/stores: the fence on a real PostgreSQL (pg,
// KRABKA_POSTGRES_URL, started by ci/postgres.sh) and on SQLite files
// (better-sqlite3), with elections on the test kit, so no Kafka is needed.
//
// Each case runs on both stores: two members of a role writing through the
// fence; a leader paused after its fence and before its commit while its
// successor is elected (the successor cannot pass the fence until the
// leader's transaction ends, and then sees the leader's write); a leader
// paused before its fence (refused); a rotation to a lower producer id (the
// kit's setEpoch), accepted when current, and the deposed leader's
// numerically higher token refused after it.
//
// better-sqlite3 is synchronous: a second connection waiting for SQLite's
// write lock would block the one thread that must commit the first, so its
// connections do not wait (busy timeout 0) and a locked database is a
// TransientError, retried once the leader committed.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const kc = require('..')
const stores = require('../stores')

const { ClosingCluster: TestCluster } = require('./closing-cluster')

const examples = path.join(__dirname, '..', '..', '..', 'examples', 'node')
const pg = require(require.resolve('pg', { paths: [examples] }))
const Sqlite = require(require.resolve('better-sqlite3', { paths: [examples] }))

const ROLE = 'billing'
const BOUND = { timeout: 20_000 }

function postgresUrl() {
  const url = process.env.KRABKA_POSTGRES_URL
  if (!url) {
    throw new Error(
      'KRABKA_POSTGRES_URL is not set: start a server with `ci/postgres.sh start` and export the URL it prints last (ci/node.sh does)',
    )
  }
  return url
}

/** One store of a test: connections to a fresh database holding the fence
 * (migrated twice: idempotent) and a `writes` table. `q` runs one statement
 * written with `$n` parameters and returns its rows. */
async function makeStore(kind, name) {
  let connect
  let q
  if (kind === 'postgres') {
    const admin = new pg.Client({ connectionString: postgresUrl() })
    await admin.connect()
    await admin.query(`DROP SCHEMA IF EXISTS ${name} CASCADE`)
    await admin.query(`CREATE SCHEMA ${name}`)
    await admin.end()
    connect = async () => {
      const c = new pg.Client({ connectionString: postgresUrl(), options: `-c search_path=${name}` })
      await c.connect()
      return c
    }
    q = async (c, sql, args = []) => (await c.query(sql, args)).rows
  } else {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'krabka-stores-')), `${name}.db`)
    connect = async () => new Sqlite(file, { timeout: 0 })
    q = async (c, sql, args = []) => {
      const stmt = c.prepare(sql.replace(/\$\d+/g, '?'))
      if (stmt.reader) return stmt.all(...args)
      stmt.run(...args)
      return []
    }
  }
  const store = {
    kind,
    connect,
    q,
    begin: kind === 'postgres' ? 'BEGIN' : 'BEGIN IMMEDIATE',
    opened: [],
    async open() {
      const c = await connect()
      store.opened.push(c)
      return c
    },
    /** Writes a row of `writer`; returns how many rows of `other` the
     * transaction sees. */
    async write(c, writer, token, other) {
      await q(c, 'INSERT INTO writes (writer, producer_id, epoch) VALUES ($1, $2, $3)', [
        writer,
        token.producerId,
        token.producerEpoch,
      ])
      const [row] = await q(c, 'SELECT count(*) AS n FROM writes WHERE writer = $1', [other])
      return Number(row.n)
    },
    /** One fenced transaction of process `p` with `token`: fence, write,
     * commit (rolled back on any error). */
    async fencedWrite(c, p, token, other) {
      await q(c, store.begin)
      try {
        await stores.fence(c, ROLE, token, () => p.client.describeLeadership(ROLE))
        const seen = await store.write(c, p.name, token, other)
        await q(c, 'COMMIT')
        return seen
      } catch (e) {
        await q(c, 'ROLLBACK')
        throw e
      }
    },
    async writers() {
      const c = await store.open()
      const rows = await q(c, 'SELECT writer, producer_id, epoch FROM writes ORDER BY id')
      return rows.map((r) => [r.writer, String(new kc.FencingToken(BigInt(r.producer_id), Number(r.epoch)))])
    },
    async close() {
      for (const c of store.opened) {
        if (kind === 'postgres') await c.end()
        else c.close()
      }
    },
  }
  const db = await store.open()
  await stores.migrate(db)
  await stores.migrate(db)
  await q(
    db,
    `CREATE TABLE writes (id ${kind === 'postgres' ? 'bigserial' : 'INTEGER'} PRIMARY KEY, ` +
      'writer text NOT NULL, producer_id bigint NOT NULL, epoch smallint NOT NULL)',
  )
  return store
}

/** `a` leads the role and `b` waits as its standby (its acquire tracked). */
async function leaderAndStandby(cluster, a, b) {
  const lead = await a.client.acquireLeadership(ROLE, a.name)
  const acquiring = b.client.acquireLeadership(ROLE, b.name)
  acquiring.catch(() => {})
  for (let i = 0; i < 100; i++) {
    await cluster.settle()
    if ((await a.client.describeRoleState(ROLE)).members.includes(b.name)) return [lead, acquiring]
  }
  throw new Error('b never registered')
}

/** Past the lease (30 s) and the standby's stagger. */
const pastTheLease = (cluster) => cluster.advance(60)

async function assertFenced(promise, ...parts) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof kc.FencedError, `expected FencedError, got ${e}`)
    for (const part of parts) assert.ok(e.message.includes(part), `${e.message} should name ${part}`)
    return true
  })
}

/** The cluster of a rotation: `a` leads at the last epoch of a high
 * producer id; `b`'s term will rotate to a lower one. */
async function rotated() {
  const cluster = new TestCluster()
  cluster.setEpoch(ROLE, new kc.FencingToken(9000n, 32765))
  const a = cluster.process('a')
  const b = cluster.process('b')
  const [lead, standby] = await leaderAndStandby(cluster, a, b)
  return { cluster, a, b, ta: lead.token, standby }
}

for (const kind of ['postgres', 'sqlite']) {
  test(`${kind}: two members write in token order and the deposed one is refused`, BOUND, async () => {
    const store = await makeStore(kind, `js_two_members_${kind}`)
    const [da, db] = [await store.open(), await store.open()]
    const cluster = new TestCluster()
    const [a, b] = [cluster.process('a'), cluster.process('b')]
    const [leadA, standby] = await leaderAndStandby(cluster, a, b)
    const ta = leadA.token
    await store.fencedWrite(da, a, ta, 'b')
    await store.fencedWrite(da, a, ta, 'b')
    a.crash()
    await pastTheLease(cluster)
    const tb = (await standby).token
    await store.fencedWrite(db, b, tb, 'a')
    // The deposed leader still holds its token and writes with it.
    await assertFenced(store.fencedWrite(da, a, ta, 'b'), '"billing"', String(ta), String(tb))
    await store.fencedWrite(db, b, tb, 'a')
    const [sa, sb] = [String(ta), String(tb)]
    assert.deepEqual(await store.writers(), [['a', sa], ['a', sa], ['b', sb], ['b', sb]])
    await store.close()
  })

  test(`${kind}: a leader paused after its fence commits before its successor writes`, BOUND, async () => {
    const store = await makeStore(kind, `js_paused_after_${kind}`)
    const [da, db] = [await store.open(), await store.open()]
    const cluster = new TestCluster()
    const [a, b] = [cluster.process('a'), cluster.process('b')]
    const [leadA, standby] = await leaderAndStandby(cluster, a, b)
    // A deferred transaction on SQLite too: the fence is its first
    // statement, so the write lock is the fence's, not BEGIN IMMEDIATE's.
    await store.q(da, 'BEGIN')
    await stores.fence(da, ROLE, leadA.token, () => a.client.describeLeadership(ROLE))
    a.pause()
    await pastTheLease(cluster)
    const leadB = await standby
    assert.ok(leadB.token.compare(leadA.token) > 0)
    let successor
    if (kind === 'postgres') {
      let done = false
      successor = store.fencedWrite(db, b, leadB.token, 'a').finally(() => (done = true))
      await new Promise((r) => setTimeout(r, 300))
      assert.equal(done, false, "the successor must wait for the paused leader's transaction")
    } else {
      // The successor's fence cannot take the write lock the leader's
      // fence holds: a busy database, transient.
      await store.q(db, 'BEGIN')
      await assert.rejects(
        stores.fence(db, ROLE, leadB.token, () => b.client.describeLeadership(ROLE)),
        (e) => e instanceof kc.TransientError && e.cause?.code === 'SQLITE_BUSY',
      )
      await store.q(db, 'ROLLBACK')
    }
    a.resume()
    await store.write(da, 'a', leadA.token, 'b')
    await store.q(da, 'COMMIT')
    if (kind === 'sqlite') successor = store.fencedWrite(db, b, leadB.token, 'a')
    assert.equal(await successor, 1, "the successor's transaction sees the leader's write")
    assert.deepEqual(
      (await store.writers()).map(([w]) => w),
      ['a', 'b'],
    )
    await store.close()
  })

  test(`${kind}: a leader paused before its fence is refused`, BOUND, async () => {
    const store = await makeStore(kind, `js_paused_before_${kind}`)
    const [da, db] = [await store.open(), await store.open()]
    const cluster = new TestCluster()
    const [a, b] = [cluster.process('a'), cluster.process('b')]
    const [leadA, standby] = await leaderAndStandby(cluster, a, b)
    a.pause()
    await pastTheLease(cluster)
    const leadB = await standby
    await store.fencedWrite(db, b, leadB.token, 'a')
    a.resume()
    await assertFenced(store.fencedWrite(da, a, leadA.token, 'b'), String(leadA.token), String(leadB.token))
    assert.deepEqual(
      (await store.writers()).map(([w]) => w),
      ['b'],
    )
    await store.close()
  })

  test(`${kind}: a rotation to a lower producer id is accepted when current`, BOUND, async () => {
    const store = await makeStore(kind, `js_rotation_${kind}`)
    const [da, db] = [await store.open(), await store.open()]
    const { cluster, a, b, ta, standby } = await rotated()
    await store.fencedWrite(da, a, ta, 'b')
    a.pause() // stopped, not killed: it asks its coordinator again below
    await pastTheLease(cluster)
    const tb = (await standby).token
    a.resume()
    assert.ok(tb.producerId < ta.producerId, `${tb} should rotate below ${ta}`)
    assert.ok(tb.compare(ta) < 0, 'the token order alone would refuse the new leader')
    await store.fencedWrite(db, b, tb, 'a')
    await store.fencedWrite(db, b, tb, 'a')
    await assertFenced(store.fencedWrite(da, a, ta, 'b'), String(ta), String(tb))
    assert.deepEqual(
      (await store.writers()).map(([w]) => w),
      ['a', 'b', 'b'],
    )
    await store.close()
  })

  test(`${kind}: a rotation that is not the current token is refused`, BOUND, async () => {
    const store = await makeStore(kind, `js_rotation_stale_${kind}`)
    const db = await store.open()
    const { a, ta } = await rotated()
    await store.fencedWrite(db, a, ta, 'b')
    const stale = new kc.FencingToken(ta.producerId - 1n, 3)
    let asked = 0
    await store.q(db, store.begin)
    await assertFenced(
      stores.fence(db, ROLE, stale, () => {
        asked++
        return a.client.describeLeadership(ROLE)
      }),
      String(ta),
      String(stale),
    )
    await store.q(db, 'ROLLBACK')
    assert.equal(asked, 1, "the rotation's proof is asked once")
    assert.deepEqual(await store.writers(), [['a', String(ta)]])
    await store.close()
  })
}

test('bad arguments and a missing table are named', BOUND, async () => {
  const db = new Sqlite(':memory:')
  const ok = new kc.FencingToken(1n, 0)
  const never = () => assert.fail('not asked')
  await assert.rejects(stores.fence(db, ROLE, kc.NO_EPOCH, never), (e) => e instanceof kc.InvalidArgumentError && /NoEpoch/.test(e.message))
  await assert.rejects(stores.fence(db, '', ok, never), kc.InvalidArgumentError)
  await assert.rejects(stores.fence({}, ROLE, ok, never), kc.InvalidArgumentError)
  await assert.rejects(stores.fence(db, ROLE, ok, never), (e) => {
    assert.ok(e instanceof kc.FatalError, String(e))
    assert.match(e.message, /"billing" on SQLite/)
    assert.equal(e.cause?.code, 'SQLITE_ERROR')
    return true
  })
  db.close()
})
