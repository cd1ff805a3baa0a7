// The test kit (krabka.coordination.TestCluster) from plain Java, as JUnit 5
// tests, run by ci/uniffi.sh without a broker: the scenario set every
// binding runs on the kit (election, renewal, crash failover at the deadline
// and at the deadline plus rank x stagger, pause then a fenced write, resign
// hand-over, an observer seeing it all, the leader loop contending again
// after losing, input offsets committed with a write and resumed from by
// the next leader), through the Java API only (KrabkaJava, the …Async forms of
// the cluster's time calls), with the default 30 s leases and no sleep.
package krabka.coordination.javatest;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import krabka.coordination.BlockingObserver;
import krabka.coordination.CommittedOffset;
import krabka.coordination.ConsumedOffsets;
import krabka.coordination.ErrorKind;
import krabka.coordination.FencingToken;
import krabka.coordination.GuardedWrite;
import krabka.coordination.InputPartitions;
import krabka.coordination.KrabkaException;
import krabka.coordination.KrabkaJava;
import krabka.coordination.Lease;
import krabka.coordination.Leadership;
import krabka.coordination.RoleView;
import krabka.coordination.RosterEntry;
import krabka.coordination.TestCluster;
import krabka.coordination.TestProcess;
import krabka.coordination.TestProcessState;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(10)
class TestingKitJavaTest {
    static final String ROLE = "billing";

    /** {@code member} contends on {@code p} in the background; returns once it waits in the roster. */
    static CompletableFuture<Leadership> standby(TestCluster cluster, TestProcess p, String member) throws Exception {
        CompletableFuture<Leadership> acquiring = KrabkaJava.acquireAsync(p.getClient(), ROLE, member);
        for (int i = 0; i < 100; i++) {
            cluster.settleAsync().join();
            for (RosterEntry e : KrabkaJava.describeRoleState(p.getClient(), ROLE).getRoster()) {
                if (e.getMember().equals(member)) return acquiring;
            }
        }
        throw new AssertionError(member + " never registered");
    }

    static void advance(TestCluster cluster, long millis) {
        cluster.advanceAsync(Duration.ofMillis(millis)).join();
    }

    @Test
    @DisplayName("a write with offsets commits them; the next leader resumes from them")
    void aWriteWithOffsetsCommitsThemAndTheNextLeaderResumesFromThem() throws Exception {
        TestCluster cluster = new TestCluster();
        TestProcess a = cluster.process("a");
        TestProcess b = cluster.process("b");
        Leadership leadA = KrabkaJava.acquire(a.getClient(), ROLE, "a");
        assertNull(cluster.committedOffset("pipeline", "input", 0), "nothing committed yet");
        KrabkaJava.writeWithOffsets(leadA, List.of(KrabkaJava.record("orders", "a-1".getBytes())),
            new ConsumedOffsets("pipeline", List.of(KrabkaJava.inputOffset("input", 0, 1L))));
        assertEquals(1L, cluster.committedOffset("pipeline", "input", 0));
        long deadline = leadA.lease().getDeadline();
        CompletableFuture<Leadership> waitB = standby(cluster, b, "b");
        a.crash();
        advance(cluster, deadline - cluster.getNowMillis());
        Leadership leadB = waitB.get(1, TimeUnit.SECONDS);
        List<CommittedOffset> resume = KrabkaJava.committedOffsetsAsync(leadB, "pipeline",
            List.of(new InputPartitions("input", List.of(0)))).get(5, TimeUnit.SECONDS);
        assertEquals(List.of(new CommittedOffset("input", 0, 1L, null)), resume);
        KrabkaJava.writeWithOffsetsAsync(leadB, List.of(),
            new ConsumedOffsets("pipeline", List.of(KrabkaJava.inputOffset("input", 0, 2L)))).get(5, TimeUnit.SECONDS);
        assertEquals(2L, cluster.committedOffset("pipeline", "input", 0));
    }

    @Test
    @DisplayName("the first member leads and renews while time passes")
    void theFirstMemberLeadsAndRenewsWhileTimePasses() throws Exception {
        TestCluster cluster = new TestCluster();
        TestProcess a = cluster.process("a");
        long start = cluster.getNowMillis();
        Leadership lead = KrabkaJava.acquire(a.getClient(), ROLE, "a");
        assertEquals(start, lead.lease().getGrantedAt());
        assertTrue(cluster.describeLeadershipAsync(ROLE).join().authoritative(lead.token()));
        advance(cluster, 120_000);
        assertTrue(lead.isHeld());
        assertTrue(lead.lease().getGrantedAt() > start + 100_000, "renewed: " + lead.lease());
        assertTrue(lead.lease().getDeadline() > cluster.getNowMillis());
        a.getClient().close();
    }

    @Test
    @DisplayName("a crashed leader is replaced at its deadline by rank 0")
    void aCrashedLeaderIsReplacedAtItsDeadlinePlusTheStagger() throws Exception {
        TestCluster cluster = new TestCluster();
        TestProcess a = cluster.process("a");
        TestProcess b = cluster.process("b");
        Leadership leadA = KrabkaJava.acquire(a.getClient(), ROLE, "a");
        long deadline = leadA.lease().getDeadline();
        CompletableFuture<Leadership> waitB = standby(cluster, b, "b");
        a.crash();
        assertEquals(TestProcessState.CRASHED, a.getState());
        advance(cluster, deadline - cluster.getNowMillis() - 1);
        assertFalse(waitB.isDone(), "b must wait out the lease");
        advance(cluster, 1);
        Leadership leadB = waitB.get(1, TimeUnit.SECONDS);
        assertEquals(deadline, leadB.lease().getGrantedAt());
        assertTrue(leadB.token().compareTo(leadA.token()) > 0);
    }

    @Test
    @DisplayName("rank 1 challenges one stagger after the deadline when rank 0 is dead too")
    void aCrashedLeaderIsReplacedAtItsDeadlinePlusTheStaggerAtRank1() throws Exception {
        TestCluster cluster = new TestCluster();
        TestProcess a = cluster.process("a");
        TestProcess b = cluster.process("b");
        TestProcess c = cluster.process("c");
        long deadline = KrabkaJava.acquire(a.getClient(), ROLE, "a").lease().getDeadline();
        standby(cluster, b, "b");
        CompletableFuture<Leadership> waitC = standby(cluster, c, "c");
        a.crash();
        b.crash();
        // The default stagger: 5 s per rank.
        advance(cluster, deadline + 5_000 - cluster.getNowMillis() - 1);
        assertFalse(waitC.isDone(), "c must wait a stagger past the deadline");
        advance(cluster, 1);
        assertEquals(deadline + 5_000, waitC.get(1, TimeUnit.SECONDS).lease().getGrantedAt());
    }

    @Test
    @DisplayName("a paused leader wakes deposed and its write in flight is fenced")
    void aPausedLeaderWakesDeposedAndItsWriteIsFenced() throws Exception {
        TestCluster cluster = new TestCluster();
        TestProcess a = cluster.process("a");
        TestProcess b = cluster.process("b");
        Leadership leadA = KrabkaJava.acquire(a.getClient(), ROLE, "a");
        KrabkaJava.write(leadA, List.of(KrabkaJava.record("orders", "a-1".getBytes())));
        CompletableFuture<Leadership> waitB = standby(cluster, b, "b");
        a.pause();
        CompletableFuture<Void> write = KrabkaJava.writeAsync(leadA, List.of(KrabkaJava.record("orders", "a-2".getBytes())));
        advance(cluster, 40_000);
        Leadership leadB = waitB.get(1, TimeUnit.SECONDS);
        KrabkaJava.write(leadB, List.of(KrabkaJava.record("orders", "b-1".getBytes())));
        assertFalse(write.isDone(), "a paused process does nothing");
        a.resume();
        cluster.settleAsync().join();
        ExecutionException e = assertThrows(ExecutionException.class, () -> write.get(1, TimeUnit.SECONDS));
        assertInstanceOf(KrabkaException.Fenced.class, e.getCause());
        List<String> written = new ArrayList<>();
        for (GuardedWrite w : cluster.guardedWrites()) written.add(new String(w.getValue()) + " " + w.getToken());
        assertEquals(List.of("a-1 " + leadA.token(), "b-1 " + leadB.token()), written);
    }

    @Test
    @DisplayName("a resign hands over without waiting for the lease")
    void aResignHandsOverWithoutWaitingForTheLease() throws Exception {
        TestCluster cluster = new TestCluster();
        TestProcess a = cluster.process("a");
        TestProcess b = cluster.process("b");
        Leadership leadA = KrabkaJava.acquire(a.getClient(), ROLE, "a");
        CompletableFuture<Leadership> waitB = standby(cluster, b, "b");
        KrabkaJava.resign(leadA);
        advance(cluster, 2_000);
        assertTrue(waitB.isDone(), "b takes over at once");
        assertTrue(waitB.get().token().compareTo(leadA.token()) > 0);
        assertEquals(ErrorKind.RESIGNED, leadA.ended().getKind());
    }

    @Test
    @DisplayName("an observer sees the election, the failover and the hand-over in order")
    void anObserverSeesTheFailover() throws Exception {
        TestCluster cluster = new TestCluster();
        TestProcess a = cluster.process("a");
        TestProcess b = cluster.process("b");
        TestProcess c = cluster.process("c");
        List<String> leaders = new CopyOnWriteArrayList<>();
        try (BlockingObserver observer = KrabkaJava.observe(cluster.process("observer").getClient(), List.of(ROLE))) {
            Thread watching = new Thread(() -> {
                for (RoleView v : observer) {
                    Lease l = v.getLeader();
                    String seen = l == null ? null : l.getMember() + " " + l.getToken();
                    if (seen != null && (leaders.isEmpty() || !leaders.get(leaders.size() - 1).equals(seen))) leaders.add(seen);
                }
            });
            watching.start();
            Leadership leadA = KrabkaJava.acquire(a.getClient(), ROLE, "a");
            CompletableFuture<Leadership> waitB = standby(cluster, b, "b");
            CompletableFuture<Leadership> waitC = standby(cluster, c, "c");
            a.crash();
            advance(cluster, 35_000);
            Leadership leadB = waitB.get(1, TimeUnit.SECONDS);
            KrabkaJava.resign(leadB);
            advance(cluster, 2_000);
            Leadership leadC = waitC.get(1, TimeUnit.SECONDS);
            cluster.settleAsync().join();
            observer.stop();
            watching.join(5_000);
            assertEquals(List.of("a " + leadA.token(), "b " + leadB.token(), "c " + leadC.token()), leaders);
        }
    }

    @Test
    @DisplayName("leadAsync contends again after losing its term")
    void aLeaderLoopContendsAgainAfterLosing() throws Exception {
        TestCluster cluster = new TestCluster();
        TestProcess a = cluster.process("a");
        TestProcess b = cluster.process("b");
        List<FencingToken> tokens = new CopyOnWriteArrayList<>();
        CompletableFuture<Void> loop = KrabkaJava.leadAsync(a.getClient(), ROLE, "a", (leadership, term) -> {
            tokens.add(leadership.token());
            // Waits (real time, bounded) for the term's end, which the cluster's clock brings.
            while (!term.awaitEnd(1, TimeUnit.SECONDS)) {
                // the term goes on
            }
        });
        for (int i = 0; i < 100 && tokens.isEmpty(); i++) cluster.settleAsync().join();
        assertEquals(1, tokens.size());
        CompletableFuture<Leadership> waitB = standby(cluster, b, "b");
        a.pause();
        advance(cluster, 40_000);
        Leadership leadB = waitB.get(1, TimeUnit.SECONDS);
        a.resume();
        advance(cluster, 5_000);
        KrabkaJava.resign(leadB);
        advance(cluster, 60_000);
        for (int i = 0; i < 100 && tokens.size() < 2; i++) cluster.settleAsync().join();
        assertEquals(2, tokens.size(), tokens.toString());
        assertTrue(tokens.get(0).compareTo(leadB.token()) < 0 && leadB.token().compareTo(tokens.get(1)) < 0, tokens.toString());
        loop.cancel(true);
    }

    @Test
    @DisplayName("bad arguments are refused at the call, the future's cause the binding's exception")
    void badArguments() throws Exception {
        assertThrows(KrabkaException.InvalidArgument.class, () -> new TestCluster(0));
        TestCluster cluster = new TestCluster();
        CompletionCause.of(cluster.advanceAsync(-1.0));
        assertThrows(KrabkaException.InvalidArgument.class, () -> cluster.process("a").failFor(-1.0));
        assertEquals(null, cluster.advanceToNextDeadlineAsync().join(), "nobody waits");
    }

    /** The cause a future completed exceptionally with, checked to be InvalidArgument. */
    static final class CompletionCause {
        static void of(CompletableFuture<?> f) {
            ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(1, TimeUnit.SECONDS));
            assertInstanceOf(KrabkaException.InvalidArgument.class, e.getCause());
        }
    }
}
