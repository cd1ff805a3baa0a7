// Hand-written Kotlin shipped with the generated bindings (package
// krabka.coordination): the API for plain Java, beside the suspend API.
// Each method is a suspend function of the generated API run either
// blocking (runBlocking: the calling thread waits) or as a
// CompletableFuture (kotlinx.coroutines' future on Dispatchers.Default;
// cancelling the future cancels the operation as cancelling a coroutine
// does: a waiting acquire deregisters). Every rule is the core's.
package krabka.coordination

import java.util.concurrent.CompletableFuture
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.future.future
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeoutOrNull

/**
 * The client, leadership and observer operations for Java: blocking
 * methods, which throw the binding's [KrabkaException] (a checked
 * exception in Java: `catch (KrabkaException.Fenced e)`), and `…Async`
 * variants returning a [CompletableFuture] that completes exceptionally
 * with it (`ExecutionException.getCause()`).
 *
 * ```java
 * try (Client client = KrabkaJava.client(Map.of("bootstrap.servers", "127.0.0.1:19092"));
 *      Leadership leadership = KrabkaJava.acquire(client, "orders", "node-1")) {
 *     KrabkaJava.write(leadership, List.of(KrabkaJava.record("results", "42".getBytes())));
 *     KrabkaJava.resign(leadership);
 * }
 * ```
 */
object KrabkaJava {
    /** Where the futures run; a failed one never cancels the others. */
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    /** A client of the librdkafka settings [kafka] (`bootstrap.servers` at least). */
    @JvmStatic @JvmOverloads @Throws(KrabkaException::class)
    fun client(kafka: Map<String, String>, options: ClientOptions? = null): Client = Client(kafka, options)

    /** A guarded write's record of [value] to [topic] (key, partition and headers left out). */
    @JvmStatic
    fun record(topic: String, value: ByteArray?): OutRecord = OutRecord(topic = topic, value = value)

    /** Acquires [role] as [member], waiting for the turn (see `Client.acquire`). */
    @JvmStatic @JvmOverloads @Throws(KrabkaException::class)
    fun acquire(client: Client, role: String, member: String, options: AcquireOptions? = null): Leadership =
        runBlocking { client.acquire(role, member, options) }

    /** [acquire] as a future; cancelling it stops the acquire (the member deregisters). */
    @JvmStatic @JvmOverloads
    fun acquireAsync(client: Client, role: String, member: String, options: AcquireOptions? = null): CompletableFuture<Leadership> =
        scope.future { client.acquire(role, member, options) }

    /** The role's current token at its transaction coordinator. */
    @JvmStatic @Throws(KrabkaException::class)
    fun describeLeadership(client: Client, role: String): LeadershipStatus = runBlocking { client.describeLeadership(role) }

    /** [describeLeadership] as a future. */
    @JvmStatic
    fun describeLeadershipAsync(client: Client, role: String): CompletableFuture<LeadershipStatus> =
        scope.future { client.describeLeadership(role) }

    /** The roster and the lease of [role]. */
    @JvmStatic @Throws(KrabkaException::class)
    fun describeRoleState(client: Client, role: String): RoleState = runBlocking { client.describeRoleState(role) }

    /** Creates the state topic unless it exists, then checks it. */
    @JvmStatic @JvmOverloads @Throws(KrabkaException::class)
    fun ensureStateTopic(client: Client, options: TopicOptions? = null): TopicReport = runBlocking { client.ensureStateTopic(options) }

    /** Writes [records] in one transaction of the term's epoch ([KrabkaException.Fenced] once deposed). */
    @JvmStatic @Throws(KrabkaException::class)
    fun write(leadership: Leadership, records: List<OutRecord>) = runBlocking { leadership.write(records) }

    /** [write] as a future. */
    @JvmStatic
    fun writeAsync(leadership: Leadership, records: List<OutRecord>): CompletableFuture<Unit> =
        scope.future { leadership.write(records) }

    /** Gives the role up. Idempotent. */
    @JvmStatic @Throws(KrabkaException::class)
    fun resign(leadership: Leadership) = runBlocking { leadership.resign() }

    /** [resign] as a future. */
    @JvmStatic
    fun resignAsync(leadership: Leadership): CompletableFuture<Unit> = scope.future { leadership.resign() }

    /** Waits for the end of the term and says why. */
    @JvmStatic @Throws(KrabkaException::class)
    fun awaitEnd(leadership: Leadership): TermEnd = runBlocking { leadership.wait() }

    /** [awaitEnd] as a future. */
    @JvmStatic
    fun awaitEndAsync(leadership: Leadership): CompletableFuture<TermEnd> = scope.future { leadership.wait() }

    /** Watches [roles] without joining them: a blocking iterator of their views. */
    @JvmStatic @JvmOverloads @Throws(KrabkaException::class)
    fun observe(client: Client, roles: List<String>, renewals: Boolean = false): BlockingObserver =
        BlockingObserver(runBlocking { client.observe(roles, renewals) })
}

/**
 * An [Observer] for Java: [next] blocks until the next view, [poll] waits
 * at most a timeout; iterating (`for (RoleView v : observer)`) ends once
 * the observer is stopped. [close] stops and frees it (try-with-resources).
 */
class BlockingObserver internal constructor(private val observer: Observer) : Iterable<RoleView>, AutoCloseable {
    /** The next view, or null once stopped (blocks). */
    @Throws(KrabkaException::class)
    fun next(): RoleView? = runBlocking { observer.next() }

    /** The next view within [timeout] of [unit], or null when none came (or it was stopped). */
    @Throws(KrabkaException::class)
    fun poll(timeout: Long, unit: TimeUnit): RoleView? =
        runBlocking { withTimeoutOrNull(unit.toMillis(timeout)) { observer.next() } }

    /** Wakes a waiting [next] from any thread; it returns null. */
    fun stop() = observer.stop()

    override fun iterator(): Iterator<RoleView> = object : Iterator<RoleView> {
        private var ahead: RoleView? = null
        private var done = false
        override fun hasNext(): Boolean {
            if (ahead == null && !done) ahead = this@BlockingObserver.next().also { done = it == null }
            return ahead != null
        }
        override fun next(): RoleView {
            if (!hasNext()) throw NoSuchElementException("the observer is stopped")
            return ahead!!.also { ahead = null }
        }
    }

    override fun close() {
        observer.stop()
        observer.close()
    }
}
