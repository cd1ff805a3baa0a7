// The test kit (krabka.coordination.TestCluster) from Kotlin, as JUnit 5
// tests, run by ci/uniffi.sh without a broker: the scenario set every
// binding runs on the kit (election, renewal, crash failover at the deadline
// and at the deadline plus rank × stagger, pause then a fenced write, resign
// hand-over, cut and heal, failFor, an observer seeing it all, the leader
// loop contending again after losing, a deposed leader's write with input
// offsets fenced and the group's offset unmoved), with the default 30 s leases and no
// sleep: the tests move the cluster's clock.
package krabka.coordination.test

import krabka.coordination.*
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.Deferred
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.cancelChildren
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.supervisorScope
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertInstanceOf
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertSame
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.time.Duration

const val ROLE = "billing"

/**
 * A test body on a coroutine, bounded so that a broken rule fails instead of
 * hanging. A crashed process's pending calls end with the closed error: in a
 * supervisor scope such a child fails alone (its error is seen where it is
 * awaited) instead of cancelling the test. What the body left pending is
 * cancelled, not waited for.
 */
fun kit(body: suspend CoroutineScope.(TestCluster) -> Unit): Unit = runBlocking {
    withTimeout(10_000) {
        supervisorScope {
            body(TestCluster())
            coroutineContext.cancelChildren()
        }
    }
}

/** [member] contends on [p] in the background; returns once it waits in the roster. */
suspend fun CoroutineScope.standby(cluster: TestCluster, p: TestProcess, member: String): Deferred<Leadership> {
    val acquiring = async { p.client.acquire(ROLE, member) }
    repeat(100) {
        cluster.settle()
        if (p.client.describeRoleState(ROLE).roster.any { it.member == member }) return acquiring
    }
    throw AssertionError("$member never registered")
}

fun record(value: String, key: String? = null) =
    listOf(OutRecord(topic = "orders", value = value.toByteArray(), key = key?.toByteArray()))

class TestingKitTest {
    @Test
    fun `the first member leads and renews while time passes`() = kit { cluster ->
        val a = cluster.process("a")
        val start = cluster.nowMillis
        val lead = a.client.acquire(ROLE, "a")
        assertEquals(start, lead.lease().grantedAt)
        assertTrue(cluster.describeLeadership(ROLE).authoritative(lead.token()))
        cluster.advance(Duration.ofSeconds(120))
        assertEquals(start + 120_000, cluster.nowMillis)
        assertTrue(lead.isHeld())
        assertTrue(lead.lease().grantedAt > start + 100_000, "renewed every 10 s: ${lead.lease()}")
        assertTrue(lead.lease().deadline > cluster.nowMillis)
        assertEquals(0, lead.renewalFailures())
        a.client.closeClient()
    }

    @Test
    fun `a crashed leader is replaced at its deadline plus the stagger`() = kit { cluster ->
        val (a, b) = cluster.process("a") to cluster.process("b")
        val leadA = a.client.acquire(ROLE, "a")
        val deadline = leadA.lease().deadline
        val waitB = standby(cluster, b, "b")
        a.crash()
        assertEquals(TestProcessState.CRASHED, a.state)
        cluster.advance(Duration.ofMillis(deadline - cluster.nowMillis - 1))
        assertFalse(waitB.isCompleted, "b must wait out the lease")
        cluster.advance(Duration.ofMillis(1))
        assertTrue(waitB.isCompleted, "b challenges at the deadline")
        val leadB = waitB.await()
        assertTrue(leadB.token() > leadA.token())
        assertEquals(deadline, leadB.lease().grantedAt)
        assertTrue(cluster.describeLeadership(ROLE).authoritative(leadB.token()))
        a.resume()
        assertEquals(TestProcessState.CRASHED, a.state, "a crash is for good")
    }

    @Test
    fun `a crashed leader is replaced at its deadline plus the stagger, at rank 1`() = kit { cluster ->
        val (a, b, c) = listOf("a", "b", "c").map(cluster::process)
        val leadA = a.client.acquire(ROLE, "a")
        val deadline = leadA.lease().deadline
        standby(cluster, b, "b")
        val waitC = standby(cluster, c, "c")
        a.crash()
        b.crash()
        // The default stagger: 5 s per rank.
        val at = deadline + 5_000
        cluster.advance(Duration.ofMillis(at - cluster.nowMillis - 1))
        assertFalse(waitC.isCompleted, "c must wait one stagger past the deadline")
        cluster.advance(Duration.ofMillis(1))
        assertTrue(waitC.isCompleted)
        assertEquals(at, waitC.await().lease().grantedAt)
    }

    @Test
    fun `advanceToNextDeadline steps to the challenge`() = kit { cluster ->
        val (a, b) = cluster.process("a") to cluster.process("b")
        val leadA = a.client.acquire(ROLE, "a")
        val waitB = standby(cluster, b, "b")
        a.crash()
        var steps = 0
        while (!waitB.isCompleted && steps++ < 100) {
            val at = cluster.advanceToNextDeadline()!!
            assertTrue(at.toEpochMilli() <= leadA.lease().deadline)
        }
        assertEquals(leadA.lease().deadline, waitB.await().lease().grantedAt)
        assertEquals(leadA.lease().deadline, cluster.now.toEpochMilli())
    }

    @Test
    fun `a paused leader wakes deposed and its write is fenced`() = kit { cluster ->
        val (a, b) = cluster.process("a") to cluster.process("b")
        val leadA = a.client.acquire(ROLE, "a")
        leadA.write(record("a-1"))
        val waitB = standby(cluster, b, "b")
        a.pause()
        assertEquals(TestProcessState.PAUSED, a.state)
        // runCatching: a failed child would cancel the test's scope.
        val write = async { runCatching { leadA.write(record("a-2")) } }
        cluster.advance(Duration.ofSeconds(40))
        val leadB = waitB.await()
        leadB.write(record("b-1", key = "k"))
        assertFalse(write.isCompleted, "a paused process does nothing")
        a.resume()
        cluster.settle()
        assertInstanceOf(KrabkaException.Fenced::class.java, write.await().exceptionOrNull())
        assertFalse(leadA.isHeld())
        val writes = cluster.guardedWrites()
        assertEquals(
            listOf("a-1" to leadA.token(), "b-1" to leadB.token()),
            writes.map { it.value!!.decodeToString() to it.token },
        )
        val w = writes[1]
        assertEquals(listOf<Any>("orders", 0, 1L, ROLE, "k"), listOf(w.topic, w.partition, w.offset, w.role, w.key.decodeToString()))
        assertTrue(writes[0].commit < w.commit)
    }

    @Test
    fun `a resign hands over without waiting for the lease`() = kit { cluster ->
        val (a, b) = cluster.process("a") to cluster.process("b")
        val leadA = a.client.acquire(ROLE, "a")
        val waitB = standby(cluster, b, "b")
        val before = cluster.nowMillis
        leadA.resign()
        cluster.advance(Duration.ofSeconds(2)) // b follows the partition with one-second polls
        assertTrue(waitB.isCompleted, "b takes over at once")
        assertTrue(waitB.await().token() > leadA.token())
        assertTrue(cluster.nowMillis - before <= 2_000)
        assertEquals(ErrorKind.RESIGNED, leadA.ended()?.kind)
    }

    @Test
    fun `a leader cut off loses its lease, then healed waits behind the new one`() = kit { cluster ->
        val (a, b) = cluster.process("a") to cluster.process("b")
        val leadA = a.client.acquire(ROLE, "a")
        val waitB = standby(cluster, b, "b")
        a.cutOff()
        assertEquals(TestProcessState.CUT_OFF, a.state)
        cluster.advance(Duration.ofSeconds(40))
        assertFalse(leadA.isHeld())
        assertEquals(ErrorKind.LEASE_EXPIRED, leadA.ended()?.kind)
        val leadB = waitB.await()
        a.heal()
        assertEquals(TestProcessState.RUNNING, a.state)
        val again = standby(cluster, a, "a")
        cluster.advance(Duration.ofSeconds(35))
        assertFalse(again.isCompleted, "no failback: a waits behind b")
        assertTrue(leadB.isHeld())
    }

    @Test
    fun `renewals that fail for a while keep the role`() = kit { cluster ->
        val a = cluster.process("a")
        val lead = a.client.acquire(ROLE, "a")
        a.failFor(Duration.ofSeconds(15))
        cluster.advance(Duration.ofSeconds(12))
        assertTrue(lead.renewalFailures() > 0, "the renewal at 10 s failed")
        cluster.advance(Duration.ofSeconds(28))
        assertTrue(lead.isHeld())
        assertEquals(0, lead.renewalFailures())
    }

    @Test
    fun `an observer sees the failover`() = kit { cluster ->
        val (a, b, c) = listOf("a", "b", "c").map(cluster::process)
        val observer = cluster.process("observer").client.observe(listOf(ROLE))
        val leaders = mutableListOf<Pair<String, FencingToken>>()
        val watching = launch {
            while (true) {
                val leader = (observer.next() ?: break).leader ?: continue
                if (leaders.lastOrNull()?.first != leader.member) leaders += leader.member to leader.token
            }
        }
        val leadA = a.client.acquire(ROLE, "a")
        val waitB = standby(cluster, b, "b")
        val waitC = standby(cluster, c, "c")
        a.crash()
        cluster.advance(Duration.ofSeconds(35))
        val leadB = waitB.await()
        leadB.resign()
        cluster.advance(Duration.ofSeconds(2))
        val leadC = waitC.await()
        cluster.settle()
        observer.stop()
        watching.join()
        assertEquals(listOf("a" to leadA.token(), "b" to leadB.token(), "c" to leadC.token()), leaders)
    }

    @Test
    fun `a leader loop contends again after losing`() = kit { cluster ->
        val (a, b) = cluster.process("a") to cluster.process("b")
        val tokens = mutableListOf<FencingToken>()
        val first = CompletableDeferred<Unit>()
        val looping = launch {
            a.client.lead(ROLE, "a") { leadership ->
                tokens += leadership.token()
                first.complete(Unit)
                awaitCancellation()
            }
        }
        repeat(100) { if (!first.isCompleted) cluster.settle() }
        assertEquals(1, tokens.size)
        val waitB = standby(cluster, b, "b")
        a.pause()
        cluster.advance(Duration.ofSeconds(40))
        val leadB = waitB.await()
        a.resume()
        cluster.advance(Duration.ofSeconds(5))
        leadB.resign()
        cluster.advance(Duration.ofSeconds(60))
        // The loop's own steps (the work cancelled, the resign, the next
        // acquire) run on this test's thread between the cluster's settles.
        repeat(100) { if (tokens.size < 2) cluster.settle() }
        assertEquals(2, tokens.size, "$tokens")
        assertTrue(tokens[0] < leadB.token() && leadB.token() < tokens[1], "$tokens ${leadB.token()}")
        looping.cancelAndJoin()
    }

    @Test
    fun `a write with offsets commits them, and a deposed leader's is fenced and moves nothing`() = kit { cluster ->
        val (a, b) = cluster.process("a") to cluster.process("b")
        val group = "pipeline"
        fun at(offset: Long) = ConsumedOffsets(group, listOf(InputOffset("input", 0, offset)))
        val leadA = a.client.acquire(ROLE, "a")
        assertNull(cluster.committedOffset(group, "input", 0), "nothing committed yet")
        leadA.writeWithOffsets(record("a-1"), at(1))
        assertEquals(1L, cluster.committedOffset(group, "input", 0))
        val waitB = standby(cluster, b, "b")
        a.pause()
        val write = async { runCatching { leadA.writeWithOffsets(record("a-2"), at(2)) } }
        cluster.advance(Duration.ofSeconds(40))
        val leadB = waitB.await()
        val resume = leadB.committedOffsets(group, listOf(InputPartitions("input", listOf(0))))
        assertEquals(listOf(CommittedOffset("input", 0, 1L, null)), resume)
        a.resume()
        cluster.settle()
        assertInstanceOf(KrabkaException.Fenced::class.java, write.await().exceptionOrNull())
        assertEquals(1L, cluster.committedOffset(group, "input", 0), "the deposed leader's offset moved")
        leadB.writeWithOffsets(record("b-2"), at(2))
        assertEquals(2L, cluster.committedOffset(group, "input", 0))
        assertEquals(listOf("a-1", "b-2"), cluster.guardedWrites().map { it.value!!.decodeToString() })
        val bad = assertThrows<KrabkaException.InvalidArgument> { leadB.writeWithOffsets(record("b-3"), at(-4)) }
        assertTrue(bad.detail.contains("offset -4"), bad.detail)
    }

    @Test
    fun `a test client answers the Kafka-only operations and refuses bad arguments`() = runBlocking {
        val cluster = TestCluster(4)
        val p = cluster.process("a")
        assertSame(p.client, p.client)
        assertEquals(listOf<Any>(4, "__coordination_state"), listOf(p.client.partitions(), p.client.stateTopic()))
        val report = p.client.ensureStateTopic()
        assertEquals(listOf<Any>(false, 4), listOf(report.created, report.partitions))
        assertNull(cluster.advanceToNextDeadline(), "nobody waits")
        assertThrows<KrabkaException.InvalidArgument> { TestCluster(0) }
        val e = assertThrows<KrabkaException.InvalidArgument> { cluster.advance(-1.0) }
        assertTrue(e.detail.contains("seconds"), e.detail)
        assertThrows<KrabkaException.InvalidArgument> { p.failFor(Duration.ofSeconds(-5)) }
        p.client.close()
        assertTrue(p.client.isClosed())
        assertThrows<KrabkaException.InvalidArgument> { p.client.checkStateTopic() }
        Unit
    }
}
