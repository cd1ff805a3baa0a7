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
import java.util.concurrent.TimeoutException
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.async
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.future.future
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.runInterruptible
import kotlinx.coroutines.withTimeoutOrNull

/**
 * The client, leadership and observer operations for Java: blocking
 * methods, which throw the binding's [KrabkaException] (a checked
 * exception in Java: `catch (KrabkaException.Fenced e)`), and `…Async`
 * variants returning a [CompletableFuture] that completes exceptionally
 * with it (`ExecutionException.getCause()`); a future of no value is a
 * `CompletableFuture<Void>` completing with `null`.
 *
 * ```java
 * // Leaving the try closes the client: its roles resigned, its acquires cancelled.
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

    /**
     * [acquire], waiting at most [timeout] of [unit]: past it, the acquire is
     * stopped (the member deregisters; a role won in that instant is
     * resigned) and [TimeoutException] is thrown. A timeout of 0 or below
     * gives up at once unless the role is won without waiting.
     */
    @JvmStatic @Throws(KrabkaException::class, TimeoutException::class)
    fun acquire(client: Client, role: String, member: String, options: AcquireOptions?, timeout: Long, unit: TimeUnit): Leadership =
        runBlocking {
            withTimeoutOrNull(unit.toMillis(timeout).coerceAtLeast(0)) { client.acquire(role, member, options) }
        } ?: throw TimeoutException(
            "acquire of role \"$role\" by member \"$member\" did not win within $timeout ${unit.name.lowercase()}; the member was deregistered",
        )

    /** [acquire] as a future; cancelling it stops the acquire (the member deregisters). */
    @JvmStatic @JvmOverloads
    fun acquireAsync(client: Client, role: String, member: String, options: AcquireOptions? = null): CompletableFuture<Leadership> =
        scope.future { client.acquire(role, member, options) }

    /**
     * Closes [client] as a future (what `client.close()` and
     * try-with-resources do, blocking): its leaderships are resigned (each
     * at most its lease), its pending acquires cancelled, its leader loops
     * and observers stopped; later calls throw
     * [KrabkaException.InvalidArgument] ("the client is closed"). Never
     * completes exceptionally.
     */
    @JvmStatic
    fun closeAsync(client: Client): CompletableFuture<Void?> = scope.future { client.closeClient(); null }

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

    /** [write] as a future (of no value: `CompletableFuture<Void>`, completing with null). */
    @JvmStatic
    fun writeAsync(leadership: Leadership, records: List<OutRecord>): CompletableFuture<Void?> =
        scope.future { leadership.write(records); null }

    /** The position [offset] (the next record to read) of [topic]/[partition] for a write with offsets, without metadata. */
    @JvmStatic
    fun inputOffset(topic: String, partition: Int, offset: Long): InputOffset = InputOffset(topic, partition, offset, null)

    /**
     * Writes [records] and commits [offsets] (the input they were made from)
     * in one transaction of the term's epoch: both or neither. Once deposed,
     * [KrabkaException.Fenced] and the group's offsets do not move; bad
     * offsets (an empty group, a negative offset...) are
     * [KrabkaException.InvalidArgument] naming the value, nothing sent.
     */
    @JvmStatic @Throws(KrabkaException::class)
    fun writeWithOffsets(leadership: Leadership, records: List<OutRecord>, offsets: ConsumedOffsets) =
        runBlocking { leadership.writeWithOffsets(records, offsets) }

    /** [writeWithOffsets] as a future (of no value: `CompletableFuture<Void>`, completing with null). */
    @JvmStatic
    fun writeWithOffsetsAsync(leadership: Leadership, records: List<OutRecord>, offsets: ConsumedOffsets): CompletableFuture<Void?> =
        scope.future { leadership.writeWithOffsets(records, offsets); null }

    /**
     * What consumer group [group] has committed for [partitions], one entry
     * per partition in the order asked (read_committed; an offset of null:
     * nothing committed): where this leader resumes its input.
     */
    @JvmStatic @Throws(KrabkaException::class)
    fun committedOffsets(leadership: Leadership, group: String, partitions: List<InputPartitions>): List<CommittedOffset> =
        runBlocking { leadership.committedOffsets(group, partitions) }

    /** [committedOffsets] as a future. */
    @JvmStatic
    fun committedOffsetsAsync(leadership: Leadership, group: String, partitions: List<InputPartitions>): CompletableFuture<List<CommittedOffset>> =
        scope.future { leadership.committedOffsets(group, partitions) }

    /** Gives the role up. Idempotent. */
    @JvmStatic @Throws(KrabkaException::class)
    fun resign(leadership: Leadership) = runBlocking { leadership.resign() }

    /** [resign] as a future (of no value: `CompletableFuture<Void>`, completing with null). */
    @JvmStatic
    fun resignAsync(leadership: Leadership): CompletableFuture<Void?> = scope.future { leadership.resign(); null }

    /** Waits for the end of the term and says why (`leadership.awaitEnd()` in Kotlin). */
    @JvmStatic @Throws(KrabkaException::class)
    fun awaitEnd(leadership: Leadership): TermEnd = runBlocking { leadership.awaitEnd() }

    /** [awaitEnd] as a future. */
    @JvmStatic
    fun awaitEndAsync(leadership: Leadership): CompletableFuture<TermEnd> = scope.future { leadership.awaitEnd() }

    /**
     * The leader loop (Kotlin's `Client.lead`) on the calling thread:
     * contends for [role] as [member] and runs [work] on a thread of its own
     * for each term it wins, contending again after each, until the work
     * throws (the role is resigned and the exception rethrown: a
     * [KrabkaException] as it is, another wrapped in
     * [java.util.concurrent.ExecutionException]) or the calling thread is
     * interrupted (the loop stops, a waiting member deregisters, a running
     * term is resigned; [InterruptedException] is thrown). When the work
     * returns, the role is resigned (an immediate hand-over) and the member
     * contends again after its backoff. When the term ends under it (fenced,
     * lease expired), its [TermSignal] is set and its thread interrupted: it
     * must return then. [leadAsync] runs it as a future that `cancel` stops.
     */
    @JvmStatic @Throws(KrabkaException::class, InterruptedException::class, java.util.concurrent.ExecutionException::class)
    fun lead(client: Client, role: String, member: String, options: AcquireOptions?, work: LeaderWork) {
        try {
            runBlocking { leadJava(client, role, member, options, work) }
        } catch (e: WorkFailed) {
            throw java.util.concurrent.ExecutionException(e.cause)
        }
    }

    /** [lead] with the core's default timings. */
    @JvmStatic @Throws(KrabkaException::class, InterruptedException::class, java.util.concurrent.ExecutionException::class)
    fun lead(client: Client, role: String, member: String, work: LeaderWork) = lead(client, role, member, null, work)

    /**
     * [lead] as a future: it completes (null) once the loop stopped, or
     * exceptionally with the work's exception or a [KrabkaException];
     * `cancel(true)` stops the loop (a waiting member deregisters, a running
     * term is resigned).
     */
    @JvmStatic
    fun leadAsync(client: Client, role: String, member: String, options: AcquireOptions?, work: LeaderWork): CompletableFuture<Void?> =
        scope.future {
            try {
                leadJava(client, role, member, options, work)
            } catch (e: WorkFailed) {
                throw e.cause ?: e
            }
            null
        }

    /** [leadAsync] with the core's default timings. */
    @JvmStatic
    fun leadAsync(client: Client, role: String, member: String, work: LeaderWork): CompletableFuture<Void?> =
        leadAsync(client, role, member, null, work)

    /** The work's own exception, carried through the loop unchanged. */
    private class WorkFailed(cause: Throwable) : Exception(cause)

    private suspend fun leadJava(client: Client, role: String, member: String, options: AcquireOptions?, work: LeaderWork) =
        client.leadTerms(role, member, options) { leadership, term ->
            val signal = TermSignal(term)
            coroutineScope {
                val running = async(Dispatchers.IO) {
                    runInterruptible {
                        try {
                            work.run(leadership, signal)
                        } catch (e: InterruptedException) {
                            if (!signal.isEnded()) throw e
                        } catch (e: KrabkaException) {
                            throw e
                        } catch (e: Exception) {
                            throw WorkFailed(e)
                        }
                    }
                }
                try {
                    running.await()
                } catch (e: CancellationException) {
                    signal.end()
                    throw e
                }
            }
        }

    /** Watches [roles] without joining them: a blocking iterator of their views. */
    @JvmStatic @JvmOverloads @Throws(KrabkaException::class)
    fun observe(client: Client, roles: List<String>, renewals: Boolean = false): BlockingObserver =
        BlockingObserver(runBlocking { client.observe(roles, renewals) })
}

/**
 * The work of [KrabkaJava.lead], run once per term on a thread of its own
 * (a Java lambda: `(leadership, term) -> { ... }`). It must return once
 * [TermSignal.isEnded] (its thread is interrupted then too); what it throws
 * ends the loop after a resign.
 */
fun interface LeaderWork {
    /** Does the leader's work with the held [leadership] while [term] is not ended. */
    @Throws(Exception::class)
    fun run(leadership: Leadership, term: TermSignal)
}

/**
 * The end signal of one term of [KrabkaJava.lead]: set once the term ended
 * (fenced, lease expired, resigned) or the loop is stopping. Valid while the
 * work runs.
 */
class TermSignal internal constructor(private val term: Term) {
    @Volatile private var stopping = false

    internal fun end() {
        stopping = true
    }

    /** The term's number in its loop, from 1. */
    @Throws(KrabkaException::class)
    fun number(): Long = term.number()

    /** True once the term ended or the loop is stopping: the work must return. */
    fun isEnded(): Boolean = stopping || runCatching { term.isEnded() }.getOrDefault(true)

    /**
     * Waits until the term ends (true) or [timeout] of [unit] passes (false):
     * a pause between units of work that ends early when the term does.
     */
    @Throws(InterruptedException::class)
    fun awaitEnd(timeout: Long, unit: TimeUnit): Boolean {
        if (isEnded()) return true
        val ended = runCatching {
            runBlocking { withTimeoutOrNull(unit.toMillis(timeout).coerceAtLeast(0)) { term.ended(); true } }
        }
        // An InterruptedException (the term's end interrupts the work's
        // thread) goes to the work; a closed term has ended.
        ended.exceptionOrNull()?.let { if (it is InterruptedException) throw it }
        return ended.getOrNull() ?: isEnded()
    }
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
