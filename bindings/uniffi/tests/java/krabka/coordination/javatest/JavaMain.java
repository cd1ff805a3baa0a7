// The Java-callable API (KrabkaJava, BlockingObserver) from plain Java,
// compiled with javac against the compiled bindings and run on the JVM by
// ci/uniffi.sh against a real Kafka (KRABKA_BOOTSTRAP): acquire (blocking
// and as a CompletableFuture), describe agrees with the token, a guarded
// write, resign and a standby taking over, the observer as a blocking
// iterator, and a bad argument thrown as the binding's exception type.
//
// Usage: java ... krabka.coordination.javatest.JavaMain TOPIC
// Ends with "N passed, N failed"; exits 1 on any failure.
package krabka.coordination.javatest;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import krabka.coordination.AcquireOptions;
import krabka.coordination.BlockingObserver;
import krabka.coordination.Change;
import krabka.coordination.Client;
import krabka.coordination.FencingToken;
import krabka.coordination.KrabkaException;
import krabka.coordination.KrabkaJava;
import krabka.coordination.Leadership;
import krabka.coordination.LeadershipStatus;
import krabka.coordination.RoleView;
import krabka.coordination.TopicOptions;

public final class JavaMain {
    static int passed = 0;
    static int failed = 0;

    interface Body {
        void run() throws Exception;
    }

    static void check(String name, Body body) {
        try {
            body.run();
            passed++;
            System.out.println("ok   " + name);
        } catch (Throwable e) {
            failed++;
            System.out.println("FAIL " + name + ": " + e);
        }
    }

    static void expect(boolean cond, String what) {
        if (!cond) throw new AssertionError(what);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = System.getenv("KRABKA_BOOTSTRAP");
        String topic = args.length > 0 ? args[0] : "krabka-uniffi-results";
        String role = "uniffi-java-" + ProcessHandle.current().pid() + "-" + System.currentTimeMillis();
        AcquireOptions timings = new AcquireOptions(3.0, 1.0, 0.5);
        Map<String, String> settings = Map.of("bootstrap.servers", bootstrap == null ? "127.0.0.1:1" : bootstrap);

        check("a bad argument throws the binding's exception type, blocking and as the future's cause", () -> {
            try (Client c = KrabkaJava.client(Map.of("bootstrap.servers", "127.0.0.1:1"))) {
                try {
                    KrabkaJava.acquire(c, "r", "m", new AcquireOptions(-1.0, null, null));
                    throw new AssertionError("acquire with a negative lease did not throw");
                } catch (KrabkaException.InvalidArgument e) {
                    expect(e.getDetail().equals("lease_duration must be a positive number of seconds, got -1"), e.getDetail());
                }
                try {
                    KrabkaJava.acquireAsync(c, "r", "m", new AcquireOptions(-1.0, null, null)).get(10, TimeUnit.SECONDS);
                    throw new AssertionError("the future of a refused acquire completed");
                } catch (ExecutionException e) {
                    expect(e.getCause() instanceof KrabkaException.InvalidArgument, "cause " + e.getCause());
                }
            }
            try {
                KrabkaJava.client(Map.of());
                throw new AssertionError("a client without bootstrap.servers was made");
            } catch (KrabkaException.InvalidArgument e) {
                expect(e.getDetail().contains("bootstrap"), e.getDetail());
            }
        });
        if (bootstrap == null || bootstrap.isEmpty()) {
            System.out.println("KRABKA_BOOTSTRAP is not set: the leadership tests need a Kafka");
            failed++;
        } else {
            try (Client client = KrabkaJava.client(settings); Client other = KrabkaJava.client(settings)) {
                KrabkaJava.ensureStateTopic(client, new TopicOptions(true, null, null));
                Leadership[] held = new Leadership[2];
                check("acquire (blocking): describeLeadership agrees with the token; a guarded write commits", () -> {
                    Leadership a = KrabkaJava.acquire(client, role, "java-a", timings);
                    held[0] = a;
                    FencingToken token = a.token();
                    expect(a.isHeld() && a.member().equals("java-a"), "held by " + a.member());
                    LeadershipStatus status = KrabkaJava.describeLeadership(client, role);
                    expect(status.authoritative(token), "describe " + status.token() + " vs " + token);
                    expect(KrabkaJava.describeLeadershipAsync(client, role).get(20, TimeUnit.SECONDS).authoritative(token), "describe async");
                    KrabkaJava.write(a, List.of(KrabkaJava.record(topic, ("from java-a " + token).getBytes())));
                });
                check("acquireAsync waits behind the holder; the holder's resign hands over; the observer iterates the change", () -> {
                    Leadership a = held[0];
                    if (a == null) throw new AssertionError("no leadership");
                    try (BlockingObserver observer = KrabkaJava.observe(client, List.of(role))) {
                        RoleView initial = observer.poll(20, TimeUnit.SECONDS);
                        expect(initial != null && initial.getChange() == Change.INITIAL
                            && initial.getLeader() != null && initial.getLeader().getMember().equals("java-a"), "initial " + initial);
                        CompletableFuture<Leadership> b = KrabkaJava.acquireAsync(other, role, "java-b", timings);
                        // The standby registers, then waits for a's lease: not done while a holds it.
                        expect(KrabkaJava.describeRoleState(client, role).getLease().getMember().equals("java-a"), "a's lease");
                        expect(!b.isDone(), "b acquired while a holds the role");
                        KrabkaJava.resign(a);
                        expect(!a.isHeld(), "a still held after resign");
                        Leadership bl = b.get(20, TimeUnit.SECONDS);
                        held[1] = bl;
                        expect(KrabkaJava.describeLeadership(client, role).authoritative(bl.token()), "describe after the hand-over");
                        expect(!KrabkaJava.describeLeadership(client, role).authoritative(a.token()), "a's token still authoritative");
                        boolean sawB = false;
                        for (RoleView v : observer) {
                            if (v.getLeader() != null && v.getLeader().getMember().equals("java-b")) {
                                sawB = v.getChange() == Change.ELECTED;
                                observer.stop();
                            }
                        }
                        expect(sawB, "the observer saw no ELECTED of java-b");
                    }
                    KrabkaJava.resignAsync(held[1]).get(20, TimeUnit.SECONDS);
                    expect(!held[1].isHeld(), "b still held after resignAsync");
                    expect(KrabkaJava.awaitEnd(held[1]).getKind().name().equals("RESIGNED"), "b's end");
                });
                for (Leadership l : held) if (l != null) l.close();
            }
        }
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
