// Hand-written Kotlin shipped with the generated bindings: the fence of SQL
// stores (docs/fenced-stores.md) through JDBC, on PostgreSQL and SQLite. The
// statements and the rule on a refused token are the Rust stores crate's
// (fenceStatements, fenceCheckOffer, fenceVerdict, fenceProven); this file
// runs the statements on the caller's connection, in the caller's
// transaction, and translates the driver's errors. It needs no driver at
// compile time: only java.sql.
package krabka.coordination.jdbc

import java.sql.Connection
import java.sql.PreparedStatement
import java.sql.SQLException
import krabka.coordination.Client
import krabka.coordination.FenceStatement
import krabka.coordination.FenceStatements
import krabka.coordination.FenceStore
import krabka.coordination.FencingToken
import krabka.coordination.KrabkaException
import krabka.coordination.Leadership
import krabka.coordination.LeadershipStatus
import krabka.coordination.fenceCheckOffer
import krabka.coordination.fenceProven
import krabka.coordination.fenceStatements
import krabka.coordination.fenceVerdict
import kotlinx.coroutines.runBlocking

/**
 * Asks the role's transaction coordinator for its current token
 * (`Client.describeLeadership`). The fence calls it only for a producer id
 * rotation, while the role's fence row is locked.
 */
fun interface FenceDescribe {
    /** The current token of [role]; a [KrabkaException] is passed on. */
    @Throws(KrabkaException::class)
    fun describe(role: String): LeadershipStatus
}

/**
 * The fence of SQL stores over JDBC: a leader's database transaction commits
 * only if no newer fencing token of its role reached the store first
 * (`docs/fenced-stores.md`). PostgreSQL (pgjdbc) and SQLite (xerial's
 * sqlite-jdbc, SQLite 3.35 or newer); the drivers are the application's
 * own dependencies, told apart by the connection's
 * `DatabaseMetaData.getDatabaseProductName()`.
 *
 * ```java
 * KrabkaFence.migrate(db);                 // once: the fence table
 * db.setAutoCommit(false);
 * KrabkaFence.fence(db, leadership, client); // throws KrabkaException.Fenced
 * try (PreparedStatement s = db.prepareStatement("INSERT INTO invoices ...")) { s.executeUpdate(); }
 * db.commit();                             // roll back on any exception
 * ```
 *
 * Every method is blocking (JDBC is) and throws only [KrabkaException].
 */
object KrabkaFence {
    private val postgres by lazy { fenceStatements(FenceStore.POSTGRES) }
    private val sqlite by lazy { fenceStatements(FenceStore.SQLITE) }

    /**
     * Creates the fence table (and on PostgreSQL the `krabka_fence` SQL
     * function) if missing: the files under `stores/sql/`, idempotent. With
     * autocommit off it runs in the caller's transaction: commit it.
     * Errors: [KrabkaException.InvalidArgument] for a database that is
     * neither PostgreSQL nor SQLite; [KrabkaException.Transient] or
     * [KrabkaException.Fatal] for a database error, as in [fence].
     */
    @JvmStatic @Throws(KrabkaException::class)
    fun migrate(connection: Connection) {
        val store = store(connection)
        try {
            connection.createStatement().use { it.execute(statements(store).migration) }
        } catch (e: SQLException) {
            throw error("migrate", "(all roles)", store, e)
        }
    }

    /**
     * The fence of [leadership]'s role and token, asking [client] for the
     * proof a producer id rotation needs: see the four-argument [fence].
     */
    @JvmStatic @Throws(KrabkaException::class)
    fun fence(connection: Connection, leadership: Leadership, client: Client) =
        fence(connection, leadership.role(), leadership.token(), client)

    /** [fence] asking [client]'s `describeLeadership` for a rotation's proof. */
    @JvmStatic @Throws(KrabkaException::class)
    fun fence(connection: Connection, role: String, token: FencingToken, client: Client) =
        fence(connection, role, token, FenceDescribe { r -> runBlocking { client.describeLeadership(r) } })

    /**
     * Checks [token] against the newest token of [role] that the store
     * accepted, and advances it, inside the transaction open on
     * [connection] (autocommit off). Call it before the transaction's
     * guarded writes, then write and commit as usual.
     *
     * On return the token may write: the role's fence row holds it and
     * stays locked (on SQLite: the database's write lock is held) until the
     * transaction ends, so no transaction with another token of the role
     * commits in between, and the commit carries the advance with the
     * writes. On SQLite begin the transaction IMMEDIATE or make this its
     * first statement. [describe] is asked only when the stored token has
     * another producer id (a rotation), while the row is locked.
     *
     * Errors (after any of them, roll the transaction back):
     * [KrabkaException.Fenced] when the store accepted a newer token, or a
     * rotation is not proven current, naming the role and the tokens;
     * [KrabkaException.InvalidArgument] for autocommit on, an invalid role,
     * an unminted token or a database other than PostgreSQL and SQLite;
     * [KrabkaException.Transient] for a serialization failure or deadlock
     * (SQLSTATE 40001, 40P01: retry the whole transaction), a lost
     * connection, a busy or locked SQLite database, and what [describe]
     * throws; [KrabkaException.Fatal] for any other database error (a
     * missing table: run [migrate]).
     */
    @JvmStatic @Throws(KrabkaException::class)
    fun fence(connection: Connection, role: String, token: FencingToken, describe: FenceDescribe) {
        fenceCheckOffer(role, token)
        val store = store(connection)
        val autoCommit = try {
            connection.autoCommit
        } catch (e: SQLException) {
            throw error("fence", role, store, e)
        }
        if (autoCommit) {
            throw KrabkaException.InvalidArgument(
                "the fence of role \"$role\" must run inside the transaction it guards: turn the connection's autocommit off",
            )
        }
        val s = statements(store)
        val advanced = run(s.advance, connection, role, token, store, "fence") { it.executeQuery().use { r -> r.next() } }
        if (advanced) return
        val stored = run(s.read, connection, role, token, store, "fence (read)") {
            it.executeQuery().use { r ->
                r.next()
                FencingToken(r.getLong(1), r.getShort(2))
            }
        }
        fenceVerdict(role, stored, token)
        fenceProven(role, stored, token, describe.describe(role))
        run(s.rotate, connection, role, token, store, "fence (rotate)") { it.executeUpdate() }
    }

    private fun statements(store: FenceStore): FenceStatements =
        if (store == FenceStore.POSTGRES) postgres else sqlite

    private fun store(connection: Connection): FenceStore {
        val product = try {
            connection.metaData.databaseProductName
        } catch (e: SQLException) {
            throw KrabkaException.Fatal("the fence cannot tell the connection's database: ${e.message}")
        }
        return when (product) {
            "PostgreSQL" -> FenceStore.POSTGRES
            "SQLite" -> FenceStore.SQLITE
            else -> throw KrabkaException.InvalidArgument(
                "the fence runs on PostgreSQL and SQLite, not on \"$product\"",
            )
        }
    }

    /** Prepares [statement], binds the role, producer id and epoch it names, and runs [block]. */
    private fun <T> run(
        statement: FenceStatement,
        connection: Connection,
        role: String,
        token: FencingToken,
        store: FenceStore,
        what: String,
        block: (PreparedStatement) -> T,
    ): T = try {
        connection.prepareStatement(statement.sql).use { p ->
            statement.params.forEachIndexed { i, arg ->
                when (arg.toInt()) {
                    1 -> p.setString(i + 1, role)
                    2 -> p.setLong(i + 1, token.producerId)
                    else -> p.setShort(i + 1, token.producerEpoch)
                }
            }
            block(p)
        }
    } catch (e: SQLException) {
        throw error(what, role, store, e)
    }

    /**
     * A driver's error as the binding's: Transient for what a new
     * transaction may mend (PostgreSQL: a serialization failure, a
     * deadlock, a connection error; SQLite: busy or locked), Fatal for the
     * rest; the driver's message kept.
     */
    private fun error(what: String, role: String, store: FenceStore, e: SQLException): KrabkaException {
        val state = e.sqlState ?: ""
        val transient = when (store) {
            FenceStore.POSTGRES -> state == "40001" || state == "40P01" || state.startsWith("08")
            FenceStore.SQLITE -> (e.errorCode and 0xff) == 5 || (e.errorCode and 0xff) == 6
        }
        val name = if (store == FenceStore.POSTGRES) "PostgreSQL" else "SQLite"
        val detail = "$what of role \"$role\" on $name: ${e.message}"
        return if (transient) KrabkaException.Transient(detail) else KrabkaException.Fatal(detail)
    }
}
