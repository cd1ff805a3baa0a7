// The JDBC fence (krabka.coordination.jdbc.KrabkaFence) on a real PostgreSQL
// (KRABKA_POSTGRES_JDBC, made by ci/uniffi.sh from KRABKA_POSTGRES_URL) and
// on an SQLite file, with leaderships on the real Kafka (KRABKA_BOOTSTRAP):
// a leader writes through the fence; a second member takes over after
// resign and its first fenced write waits for the deposed leader's open
// transaction, which commits first; the deposed token is then refused,
// leaving the table unchanged; a stored token of another producer id
// (a rotation) is replaced only by the token describe proves current.
// Its own entry point (krabka.coordination.test.FenceMain), run with the
// JDBC drivers on the classpath (the bindings need them only for the fence).
//
// Usage: java ... krabka.coordination.test.FenceMain
// Ends with "N passed, N failed"; exits 1 on any failure or missing setting.
package krabka.coordination.test

import krabka.coordination.*
import krabka.coordination.jdbc.FenceDescribe
import krabka.coordination.jdbc.KrabkaFence
import kotlinx.coroutines.runBlocking
import java.io.File
import java.sql.Connection
import java.sql.DriverManager
import java.util.concurrent.CompletableFuture
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger

/** One store under test: how to connect, and its DDL for the writes table. */
class JdbcStore(val name: String, val url: String, val writesTable: String) {
    fun open(): Connection = DriverManager.getConnection(url)
}

/** Runs [block] in a transaction of a new connection; rolls back and rethrows on any error. */
fun <T> JdbcStore.tx(block: (Connection) -> T): T = open().use { db ->
    db.autoCommit = false
    try {
        block(db).also { db.commit() }
    } catch (e: Throwable) {
        db.rollback()
        throw e
    }
}

fun insert(db: Connection, role: String, writer: String) {
    db.prepareStatement("INSERT INTO jvm_fence_writes (role, writer) VALUES (?, ?)").use {
        it.setString(1, role)
        it.setString(2, writer)
        it.executeUpdate()
    }
}

/** A transaction that passes the fence with [token], then writes [writer]. */
fun JdbcStore.write(role: String, token: FencingToken, writer: String, describe: FenceDescribe) = tx { db ->
    KrabkaFence.fence(db, role, token, describe)
    insert(db, role, writer)
}

/** The writers of [role], in commit order. */
fun JdbcStore.writes(role: String): List<String> = open().use { db ->
    db.prepareStatement("SELECT writer FROM jvm_fence_writes WHERE role = ? ORDER BY id").use { s ->
        s.setString(1, role)
        s.executeQuery().use { r -> buildList { while (r.next()) add(r.getString(1)) } }
    }
}

/** The token the fence row of [role] holds, or null. */
fun JdbcStore.stored(role: String): FencingToken? = open().use { db ->
    db.prepareStatement("SELECT producer_id, epoch FROM krabka_fence WHERE role = ?").use { s ->
        s.setString(1, role)
        s.executeQuery().use { r -> if (r.next()) FencingToken(r.getLong(1), r.getShort(2)) else null }
    }
}

/** A describe through [client] that counts its calls. */
class CountingDescribe(private val client: Client) : FenceDescribe {
    val calls = AtomicInteger()
    override fun describe(role: String): LeadershipStatus {
        calls.incrementAndGet()
        return runBlocking { client.describeLeadership(role) }
    }
}

fun fenceOn(store: JdbcStore, bootstrap: String) {
    val role = "uniffi-jdbc-${store.name.lowercase()}-${ProcessHandle.current().pid()}-${System.currentTimeMillis()}"
    store.open().use { db ->
        KrabkaFence.migrate(db)
        KrabkaFence.migrate(db)
        db.createStatement().use { it.execute(store.writesTable) }
    }
    val settings = mapOf("bootstrap.servers" to bootstrap)
    Client(settings).use { client ->
        Client(settings).use { other ->
            runBlocking { client.ensureStateTopic(TopicOptions(development = true)) }
            val describe = CountingDescribe(client)
            val a = runBlocking { client.acquire(role, "member-a", SHORT) }
            val old = a.token()
            check("${store.name}: the fence refuses autocommit, an unminted token and a bad role before any statement") {
                store.open().use { db ->
                    val e = throws<KrabkaException.InvalidArgument> { KrabkaFence.fence(db, role, old, describe) }
                    expect(e.detail.contains("autocommit")) { e.detail }
                    db.autoCommit = false
                    throws<KrabkaException.InvalidArgument> { KrabkaFence.fence(db, role, FencingToken(-1, -1), describe) }
                    throws<KrabkaException.InvalidArgument> { KrabkaFence.fence(db, "", old, describe) }
                    db.rollback()
                }
                expect(store.stored(role) == null) { "a refused argument wrote ${store.stored(role)}" }
            }
            check("${store.name}: a leader's write passes the fence; the row holds its token; migrate again changes nothing") {
                store.write(role, old, "a-1", describe)
                store.open().use { KrabkaFence.migrate(it) }
                expect(store.stored(role) == old && store.writes(role) == listOf("a-1")) { "${store.stored(role)} ${store.writes(role)}" }
                expect(describe.calls.get() == 0) { "describe asked ${describe.calls.get()} times for the same producer id" }
            }
            var b: Leadership? = null
            check("${store.name}: two writers: the successor's fence waits for the deposed leader's open transaction, which commits first; then the deposed token is refused and the table is unchanged") {
                val held = store.open()
                val second = try {
                    held.autoCommit = false
                    KrabkaFence.fence(held, role, old, describe)
                    insert(held, role, "a-2")
                    runBlocking { a.resign() }
                    val successor = runBlocking { other.acquire(role, "member-b", SHORT) }
                    b = successor
                    val new = successor.token()
                    expect(new > old && new.producerId == old.producerId) { "takeover token $new after $old" }
                    val second = CompletableFuture.supplyAsync { store.write(role, new, "b-1", describe) }
                    Thread.sleep(500)
                    expect(!second.isDone) { "the successor passed the fence while the deposed leader's transaction was open: ${runCatching { second.get() }}" }
                    held.commit()
                    second
                } finally {
                    held.close()
                }
                second.get(20, TimeUnit.SECONDS)
                val new = (b ?: throw AssertionError("no successor")).token()
                expect(store.writes(role) == listOf("a-1", "a-2", "b-1") && store.stored(role) == new) { "${store.writes(role)} ${store.stored(role)}" }
                val late = throws<KrabkaException.Fenced> { store.write(role, old, "a-late", describe) }
                expect(late.detail.contains(role) && late.detail.contains("$new") && late.detail.contains("$old")) { late.detail }
                expect(store.writes(role) == listOf("a-1", "a-2", "b-1") && store.stored(role) == new) { "after the refusal: ${store.writes(role)} ${store.stored(role)}" }
                expect(describe.calls.get() == 0) { "describe asked ${describe.calls.get()} times for the same producer id" }
            }
            check("${store.name}: a stored token of another producer id (a rotation): the deposed token and an unproven one refused, the table unchanged; the current token proven by describe replaces it") {
                val successor = b ?: throw AssertionError("no successor")
                rotation(store, role, client, old, successor.token())
            }
            b?.let {
                runBlocking { it.resign() }
                it.close()
            }
            a.close()
        }
    }
}

/**
 * A stored token of another producer id (as after a rotation, written here
 * by hand): the deposed token and a proof that does not name the offered
 * token are refused, the table unchanged; the current token, proven by
 * describe while the row is locked, replaces it.
 */
fun rotation(store: JdbcStore, role: String, client: Client, old: FencingToken, new: FencingToken) {
    val rotated = FencingToken(new.producerId + 1000, 5)
    store.tx { db ->
        db.prepareStatement("UPDATE krabka_fence SET producer_id = ?, epoch = ? WHERE role = ?").use {
            it.setLong(1, rotated.producerId)
            it.setShort(2, rotated.producerEpoch)
            it.setString(3, role)
            expect(it.executeUpdate() == 1) { "no fence row to rotate" }
        }
    }
    val before = store.writes(role)
    val describe = CountingDescribe(client)
    val stale = throws<KrabkaException.Fenced> { store.write(role, old, "a-rotated", describe) }
    expect(describe.calls.get() == 1 && stale.detail.contains("$new is")) { "${describe.calls.get()} describes: ${stale.detail}" }
    val nobody = FenceDescribe { runBlocking { client.describeLeadership("$it-nobody-took-this") } }
    throws<KrabkaException.Fenced> { store.write(role, new, "b-unproven", nobody) }
    expect(store.writes(role) == before && store.stored(role) == rotated) { "after refused rotations: ${store.writes(role)} ${store.stored(role)}" }
    store.write(role, new, "b-2", describe)
    expect(describe.calls.get() == 2 && store.stored(role) == new && store.writes(role) == before + "b-2") { "${describe.calls.get()} ${store.stored(role)} ${store.writes(role)}" }
    throws<KrabkaException.Fenced> { store.write(role, old, "a-after", describe) }
    expect(describe.calls.get() == 2 && store.writes(role) == before + "b-2") { "${describe.calls.get()} ${store.writes(role)}" }
}

object FenceMain {
    @JvmStatic
    fun main(args: Array<String>) {
        val bootstrap = System.getenv("KRABKA_BOOTSTRAP")
        val postgres = System.getenv("KRABKA_POSTGRES_JDBC")
        if (bootstrap.isNullOrEmpty() || postgres.isNullOrEmpty()) {
            println("KRABKA_BOOTSTRAP and KRABKA_POSTGRES_JDBC must be set: the fence tests need a Kafka and a PostgreSQL")
            kotlin.system.exitProcess(1)
        }
        val dir = kotlin.io.path.createTempDirectory("krabka-jdbc-fence").toFile()
        try {
            fenceOn(JdbcStore("PostgreSQL", postgres,
                "CREATE TABLE IF NOT EXISTS jvm_fence_writes (id bigserial PRIMARY KEY, role text NOT NULL, writer text NOT NULL)"), bootstrap)
            fenceOn(JdbcStore("SQLite", "jdbc:sqlite:${File(dir, "fence.db")}",
                "CREATE TABLE IF NOT EXISTS jvm_fence_writes (id INTEGER PRIMARY KEY, role TEXT NOT NULL, writer TEXT NOT NULL)"), bootstrap)
        } finally {
            dir.deleteRecursively()
        }
        println("$passed passed, $failed failed")
        kotlin.system.exitProcess(if (failed == 0) 0 else 1)
    }
}
