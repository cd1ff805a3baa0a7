// A JVM worker that does a role's work only while it leads.
//
// It acquires the role (a Kotlin suspend call: it waits while another member
// leads), then writes one result per interval through guarded writes: each
// write is a transaction of the term's epoch, so a deposed leader's write is
// refused by the broker and never becomes visible. The work stops as soon as
// the term ends, whatever the reason the core gives (fenced: exit 3; lease
// expired: exit 4; any other end: exit 1). On SIGTERM/SIGINT or after --for-seconds it resigns (or,
// while still waiting, stops its acquire, which deregisters it) and exits 0.
//
//   java -Djna.library.path=target/debug -cp <classes, kotlin-stdlib,
//       kotlinx-coroutines-core-jvm, jna> krabka.coordination.example.WorkerKt \
//       --bootstrap 127.0.0.1:19092 --role nightly-report --member host-a \
//       --topic report-results
//
// The topic must exist. Options: --interval S (1), --lease S (10), --renew S
// (3), --stagger S (2), --for-seconds S (run that long, then stop).
package krabka.coordination.example

import krabka.coordination.*
import kotlinx.coroutines.*
import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit
import kotlin.system.exitProcess

class Args(argv: Array<String>) {
    private val map = argv.toList().chunked(2).associate { (k, v) ->
        require(k.startsWith("--")) { "unexpected argument $k" }
        k.removePrefix("--") to v
    }

    fun str(name: String, default: String? = null): String =
        map[name] ?: default ?: throw IllegalArgumentException("--$name is required")

    fun seconds(name: String, default: Double?): Double? =
        map[name]?.let { it.toDoubleOrNull() ?: throw IllegalArgumentException("--$name must be a number of seconds, got $it") } ?: default
}

fun log(msg: String) = println("[worker] $msg").also { System.out.flush() }

/** The role's work while leading: one guarded write per interval. */
suspend fun work(leadership: Leadership, topic: String, intervalMs: Long) {
    var n = 0
    while (true) {
        n++
        val value = "result $n of ${leadership.member()} at ${System.currentTimeMillis()}"
        try {
            leadership.write(listOf(OutRecord(topic = topic, value = value.toByteArray(),
                headers = listOf(Header("fencing-token", leadership.token().toString().toByteArray())))))
        } catch (e: KrabkaException.Fenced) {
            // The broker refused the write: a newer epoch exists. Nothing of
            // it is visible; the term is over and wait() reports it.
            log("result $n refused (fenced): ${e.detail}")
            return
        } catch (e: KrabkaException) {
            log("result $n not written (${errorKind(e)}): ${e.message}")
            if (!leadership.isHeld()) return
            delay(intervalMs)
            continue
        }
        log("result $n written")
        delay(intervalMs)
    }
}

fun main(argv: Array<String>) {
    val args = try {
        Args(argv).also { it.str("bootstrap"); it.str("role"); it.str("member"); it.str("topic") }
    } catch (e: Exception) {
        System.err.println("usage: worker --bootstrap HOST:PORT --role R --member M --topic T [--interval S] [--lease S] [--renew S] [--stagger S] [--for-seconds S]\n${e.message}")
        exitProcess(2)
    }
    val stop = CompletableDeferred<String>()
    val finished = CountDownLatch(1)
    // SIGTERM and SIGINT run the JVM's shutdown hooks: ask the worker to stop
    // and give it the time to resign before the JVM exits.
    Runtime.getRuntime().addShutdownHook(Thread {
        stop.complete("SIGTERM")
        finished.await(15, TimeUnit.SECONDS)
    })
    val code = runBlocking {
        val timer = args.seconds("for-seconds", null)?.let { s ->
            launch { delay((s * 1000).toLong()); stop.complete("time is up") }
        }
        try {
            run(args, stop)
        } finally {
            timer?.cancel()
            finished.countDown()
        }
    }
    // Exit 0 returns from main (a shutdown under way must not be re-entered).
    if (code != 0) exitProcess(code)
}

suspend fun run(args: Args, stop: CompletableDeferred<String>): Int = coroutineScope {
    val client = Client(mapOf("bootstrap.servers" to args.str("bootstrap")))
    val role = args.str("role")
    val member = args.str("member")
    val options = AcquireOptions(
        leaseDuration = args.seconds("lease", 10.0),
        renewInterval = args.seconds("renew", 3.0),
        challengeStagger = args.seconds("stagger", 2.0),
    )
    val intervalMs = ((args.seconds("interval", 1.0) ?: 1.0) * 1000).toLong()
    try {
        log("waiting for $role as $member")
        val acquire = async { client.acquire(role, member, options) }
        if (select2(acquire, stop) == null) {
            // Stopped while waiting: cancelling the acquire deregisters.
            acquire.cancelAndJoin()
            log("${stop.await()}: stopped waiting")
            return@coroutineScope 0
        }
        val leadership = acquire.await()
        log("leading $role with token ${leadership.token()}")
        val working = launch { work(leadership, args.str("topic"), intervalMs) }
        val ended = async { leadership.awaitEnd() }
        val end = select2(ended, stop)
        // Whatever happened, the work stops first.
        working.cancelAndJoin()
        if (end == null) {
            leadership.resign()
            log("${stop.await()}: resigned")
            leadership.close()
            return@coroutineScope 0
        }
        log("the term ended (${end.kind}): ${end.message}; work stopped")
        leadership.close()
        when (end.kind) {
            ErrorKind.FENCED -> 3
            ErrorKind.LEASE_EXPIRED -> 4
            else -> 1
        }
    } finally {
        client.close()
    }
}

/** The value of `a` if it completes first, or null once `stop` completes. */
suspend fun <T> select2(a: Deferred<T>, stop: Deferred<String>): T? = coroutineScope {
    val winner = CompletableDeferred<Boolean>()
    val w1 = launch { a.join(); winner.complete(true) }
    val w2 = launch { stop.join(); winner.complete(false) }
    val first = winner.await()
    w1.cancel(); w2.cancel()
    if (first) a.await() else null
}
