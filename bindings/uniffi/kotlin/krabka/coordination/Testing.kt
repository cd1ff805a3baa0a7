// Hand-written Kotlin shipped with the generated bindings (package
// krabka.coordination): the core's test kit in Kotlin and Java, over the
// generated TestClusterBase and TestProcessBase (uniffi.toml renames them).
// A process's client is the binding's own Client; the time calls are
// suspend functions for Kotlin and CompletableFutures for Java. Every rule
// is the core's: the election, the fencing, the clock.
package krabka.coordination

import java.time.Duration
import java.time.Instant
import java.util.concurrent.CompletableFuture
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.future.future

/**
 * An in-memory cluster running the library's own election rules (Kafka's
 * epochs, fencing and read_committed visibility; no broker), with one
 * manual clock for all its processes: nothing waits on real time, the test
 * moves the clock. The clock starts at 2026-01-01T00:00:00Z.
 *
 * ```kotlin
 * val cluster = TestCluster()
 * val (a, b) = cluster.process("a") to cluster.process("b")
 * val leader = a.client.acquire("billing", "a")
 * val standby = async { b.client.acquire("billing", "b") }
 * cluster.settle()
 * a.crash()                                 // SIGKILL: no renewal, no resign
 * cluster.advance(Duration.ofSeconds(60))   // past a's 30 s lease
 * check(standby.await().token() > leader.token())
 * ```
 *
 * From Java the time calls are the `…Async` forms, returning a
 * [CompletableFuture] (`cluster.advanceAsync(Duration.ofSeconds(60)).join()`);
 * the Kotlin suspend forms are hidden from Java.
 *
 * A [partitions] below 1 throws [KrabkaException.InvalidArgument], naming it.
 */
class TestCluster private constructor(private val base: TestClusterBase) {
    /** A cluster whose state topic has [partitions] partitions (16 when left out). */
    @JvmOverloads
    @Throws(KrabkaException::class)
    constructor(partitions: Int? = null) : this(TestClusterBase(partitions))

    /** The partition count of the state topic. */
    val partitions: Int get() = base.partitions()

    /** The cluster's wall time (epoch ms). */
    val nowMillis: Long get() = base.nowMillis()

    /** The cluster's wall time. */
    val now: Instant get() = Instant.ofEpochMilli(base.nowMillis())

    /**
     * A new process on the cluster, named [name] (for the test's own
     * messages; the member id is what an acquire is given), with its own
     * [Client] on the cluster and its clock.
     */
    @Throws(KrabkaException::class)
    fun process(name: String): TestProcess = TestProcess(base.process(name))

    /**
     * Moves the clock forward [by] (not negative, else
     * [KrabkaException.InvalidArgument]), deadline by deadline: at each
     * instant a member waits for on the way the members act, then to the
     * end; returns once they are quiet there.
     */
    @JvmSynthetic
    suspend fun advance(by: Duration) = base.advance(seconds(by)!!)

    /** [advance] by [seconds]. */
    @JvmSynthetic
    suspend fun advance(seconds: Double) = base.advance(seconds)

    /**
     * Moves the clock to the earliest instant any member waits for and lets
     * the members act there: that instant, or null (the clock unmoved) when
     * nobody waits.
     */
    @JvmSynthetic
    suspend fun advanceToNextDeadline(): Instant? = base.advanceToNextDeadline()?.let(Instant::ofEpochMilli)

    /**
     * Returns once the members have nothing left to do at this instant
     * (none made a call or set a timer for a few milliseconds of real time).
     * Call it after starting an acquire or a write (in another coroutine or
     * as a future), before moving the clock.
     */
    @JvmSynthetic
    suspend fun settle() = base.settle()

    /** What the role's transaction coordinator says now, asked by a process of the cluster's own that no fault touches. */
    @JvmSynthetic
    suspend fun describeLeadership(role: String): LeadershipStatus = base.describeLeadership(role)

    /** Every guarded write the cluster committed (every topic but the state topic), in commit order, each with its term's token. */
    fun guardedWrites(): List<GuardedWrite> = base.guardedWrites()

    /**
     * What consumer group [group] has committed for [topic]/[partition] (the
     * offset of the next record to read), null when nothing: the position
     * that guarded writes with offsets committed; a pending commit does not count.
     */
    fun committedOffset(group: String, topic: String, partition: Int): Long? = base.committedOffset(group, topic, partition)

    /** [advance] for Java: completes (null) once done, or exceptionally with [KrabkaException]. */
    fun advanceAsync(by: Duration): CompletableFuture<Void?> = scope.future { advance(by); null }

    /** [advance] by [seconds] for Java. */
    fun advanceAsync(seconds: Double): CompletableFuture<Void?> = scope.future { advance(seconds); null }

    /** [advanceToNextDeadline] for Java: the instant, or null when nobody waits. */
    fun advanceToNextDeadlineAsync(): CompletableFuture<Instant?> = scope.future { advanceToNextDeadline() }

    /** [settle] for Java: completes (null) once the members are quiet. */
    fun settleAsync(): CompletableFuture<Void?> = scope.future { settle(); null }

    /** [describeLeadership] for Java. */
    fun describeLeadershipAsync(role: String): CompletableFuture<LeadershipStatus> = scope.future { describeLeadership(role) }

    override fun toString(): String = "TestCluster(partitions=$partitions, now=$now)"

    private companion object {
        /** Where the futures run; a failed one never cancels the others. */
        val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)
    }
}

/**
 * One process of a [TestCluster]: a real [Client] on the in-memory cluster
 * and its clock, and the faults a test puts it through. A crashed or
 * paused process's pending calls return no sooner than a SIGKILLed or
 * SIGSTOPped process's would: never, or once resumed.
 */
class TestProcess internal constructor(private val base: TestProcessBase) {
    /** The name given to [TestCluster.process]. */
    val name: String = base.name()

    /**
     * The process's client: every operation works as on Kafka (the same
     * object each time; closing it closes the process's client for good).
     * `ensureStateTopic` and `checkStateTopic` report the state topic as
     * existing.
     */
    val client: Client = base.client().let { lifted ->
        Client(UniffiWithHandle, lifted.uniffiCloneHandle()).also { lifted.destroy() }
    }

    /** What the process is doing now. */
    val state: TestProcessState get() = base.state()

    /** Kills the process (SIGKILL): it neither renews nor resigns, for good; its pending and later calls end with the closed error naming the crash. */
    fun crash() = base.crash()

    /**
     * Stops the process (SIGSTOP): its calls and timers wait. Its clock goes
     * on, so on [resume] what came due fires at once and a write it had in
     * flight reaches the cluster, which fences it when another member took
     * the role meanwhile.
     */
    fun pause() = base.pause()

    /** Resumes a paused process (SIGCONT); nothing for a crashed one. */
    fun resume() = base.resume()

    /** Cuts the process off: each of its calls fails as transient (its timers run) until [heal]. */
    fun cutOff() = base.cutOff()

    /** Ends a cut. */
    fun heal() = base.heal()

    /**
     * Makes each call of the process fail as transient for [d] of the
     * cluster's time from now (a renewal or a guarded write that fails for a
     * while); a negative [d] throws [KrabkaException.InvalidArgument].
     */
    @Throws(KrabkaException::class)
    fun failFor(d: Duration) = base.failFor(seconds(d)!!)

    /** [failFor] for [seconds]. */
    @Throws(KrabkaException::class)
    fun failFor(seconds: Double) = base.failFor(seconds)

    override fun toString(): String = "TestProcess($name, $state)"
}
