// The Java-callable API (KrabkaJava, BlockingObserver) from plain Java,
// compiled with javac against the compiled bindings and run on the JVM by
// ci/uniffi.sh against a real Kafka (KRABKA_BOOTSTRAP): acquire (blocking
// and as a CompletableFuture), describe agrees with the token, a guarded
// write, resign and a standby taking over, the observer as a blocking
// iterator, and a bad argument thrown as the binding's exception type; the
// API's Java shape: no method colliding with Object's, no mangled name,
// CompletableFuture<Void>, read-only returned records, one LeadershipEvent,
// the token's wire form and FencingToken.parse, the blocking acquire with a
// timeout, and the leader loop (KrabkaJava.lead / leadAsync); a write with
// the input offsets (blocking and as a future), committedOffsets, and bad
// offsets refused.
//
// Usage: java ... krabka.coordination.javatest.JavaMain TOPIC [INPUT_TOPIC]
// Ends with "N passed, N failed"; exits 1 on any failure.
package krabka.coordination.javatest;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import krabka.coordination.AcquireEvents;
import krabka.coordination.AcquireOptions;
import krabka.coordination.BlockingObserver;
import krabka.coordination.Change;
import krabka.coordination.Client;
import krabka.coordination.CommittedOffset;
import krabka.coordination.ConsumedOffsets;
import krabka.coordination.EventRecord;
import krabka.coordination.EventStream;
import krabka.coordination.FencingToken;
import krabka.coordination.InputOffset;
import krabka.coordination.InputPartitions;
import krabka.coordination.KrabkaException;
import krabka.coordination.KrabkaJava;
import krabka.coordination.LeaderLoop;
import krabka.coordination.LeaderWork;
import krabka.coordination.Lease;
import krabka.coordination.Leadership;
import krabka.coordination.LeadershipStatus;
import krabka.coordination.Observer;
import krabka.coordination.RoleState;
import krabka.coordination.RoleView;
import krabka.coordination.Term;
import krabka.coordination.TermEnd;
import krabka.coordination.TermSignal;
import krabka.coordination.TopicOptions;
import krabka.coordination.events.LeadershipEvent;

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

    /** True when {@code o} is {@code topic}/{@code partition} at {@code offset}. */
    static boolean at(CommittedOffset o, String topic, int partition, long offset) {
        return o.getTopic().equals(topic) && o.getPartition() == partition && Long.valueOf(offset).equals(o.getOffset());
    }

    static void expect(boolean cond, String what) {
        if (!cond) throw new AssertionError(what);
    }

    /**
     * Every public class of the bindings (krabka.coordination and its
     * subpackages, read from where FencingToken was loaded), uniffi's
     * plumbing left out (FfiConverter*, [Uu]niffi*, RustBuffer*, ForeignBytes*:
     * public in the bytecode, never called by an application).
     */
    static List<Class<?>> apiClasses() throws Exception {
        List<String> names = new ArrayList<>();
        java.net.URL where = FencingToken.class.getProtectionDomain().getCodeSource().getLocation();
        java.nio.file.Path root = java.nio.file.Paths.get(where.toURI());
        if (java.nio.file.Files.isDirectory(root)) {
            try (java.util.stream.Stream<java.nio.file.Path> files = java.nio.file.Files.walk(root.resolve("krabka/coordination"))) {
                files.forEach(f -> names.add(root.relativize(f).toString().replace(java.io.File.separatorChar, '/')));
            }
        } else {
            try (java.util.jar.JarFile jar = new java.util.jar.JarFile(root.toFile())) {
                jar.stream().forEach(e -> names.add(e.getName()));
            }
        }
        List<Class<?>> out = new ArrayList<>();
        for (String n : names) {
            // The tests' and the example's classes (compiled beside the bindings here) are not the API;
            // the Micrometer binder needs the optional Micrometer jars, which this run leaves out on
            // purpose (MicrometerMain loads it with them).
            if (!n.startsWith("krabka/coordination/") || !n.endsWith(".class") || n.startsWith("krabka/coordination/javatest/")
                || n.startsWith("krabka/coordination/test/") || n.startsWith("krabka/coordination/example/")
                || n.startsWith("krabka/coordination/micrometer/")) continue;
            String name = n.substring(0, n.length() - ".class".length()).replace('/', '.');
            String simple = name.substring(name.lastIndexOf('.') + 1);
            if (simple.startsWith("FfiConverter") || simple.toLowerCase(java.util.Locale.ROOT).startsWith("uniffi") || simple.startsWith("RustBuffer")
                || simple.startsWith("ForeignBytes")) continue;
            Class<?> c = Class.forName(name, false, JavaMain.class.getClassLoader());
            if (Modifier.isPublic(c.getModifiers()) && !c.isSynthetic()) out.add(c);
        }
        expect(out.size() > 40, "found " + out.size() + " classes under " + root);
        return out;
    }

    /** The records a caller fills in for a call: the only ones with setters. */
    static final List<String> FILLED_IN = List.of("AcquireOptions", "ClientOptions", "TopicOptions", "OutRecord", "Header");

    /** The token's wire form and the Java shape of the API; needs no Kafka. */
    static void shapes() {
        check("the token's toString is its wire form; FencingToken.parse reads it back and refuses malformed text", () -> {
            FencingToken t = new FencingToken(4001L, (short) 7);
            expect(t.toString().equals("4001/7"), t.toString());
            expect(FencingToken.parse("4001/7").equals(t), "parse");
            expect(FencingToken.parse("NoEpoch").equals(FencingToken.NO_EPOCH) && FencingToken.NO_EPOCH.toString().equals("NoEpoch"), "NoEpoch");
            expect(FencingToken.parse("-9223372036854775808/-32768").getProducerId() == Long.MIN_VALUE, "the extremes");
            expect(FencingToken.parse("4002/0").compareTo(t) > 0 && t.compareTo(FencingToken.NO_EPOCH) > 0, "the core's order");
            for (String bad : new String[] {"", "4001", "4001/7 ", "4001:7", "4001/40000", "noepoch", "+1/2"}) {
                try {
                    FencingToken.parse(bad);
                    throw new AssertionError("parsed \"" + bad + "\"");
                } catch (KrabkaException.InvalidArgument e) {
                    expect(e.getDetail().contains("is not a fencing token") && e.getDetail().contains("PRODUCER_ID/EPOCH"), e.getDetail());
                }
            }
        });
        check("no method collides with Object's, and no Java-visible name is mangled", () -> {
            List<String> bad = new ArrayList<>();
            for (Class<?> c : apiClasses()) {
                for (Method m : c.getMethods()) {
                    // Kotlin's internal members carry a `$module` suffix.
                    if (m.getDeclaringClass() == Object.class || m.isSynthetic() || m.isBridge() || m.getName().contains("$")) continue;
                    boolean objects = false;
                    for (Method o : Object.class.getMethods()) objects |= o.getName().equals(m.getName()) && !m.getName().equals("equals")
                        && !m.getName().equals("hashCode") && !m.getName().equals("toString");
                    if (objects || m.getName().contains("-")) bad.add(c.getName() + "." + m.getName());
                }
            }
            expect(bad.isEmpty(), "methods: " + bad);
        });
        check("returned records are read-only; one LeadershipEvent type", () -> {
            List<String> writable = new ArrayList<>();
            for (Class<?> c : apiClasses()) {
                if (FILLED_IN.contains(c.getSimpleName()) || c.isInterface()) continue;
                for (Method m : c.getDeclaredMethods()) {
                    // A setter is set + a capital (setValue), never a word that starts so (settle).
                    String n = m.getName();
                    if (Modifier.isPublic(m.getModifiers()) && n.startsWith("set") && n.length() > 3 && Character.isUpperCase(n.charAt(3))
                        && m.getParameterCount() == 1 && !n.contains("$")) {
                        writable.add(c.getName() + "." + m.getName());
                    }
                }
            }
            expect(writable.isEmpty(), "setters on returned values: " + writable);
            for (Class<?> c : new Class<?>[] {TermEnd.class, Lease.class, EventRecord.class, RoleView.class, FencingToken.class}) {
                for (java.lang.reflect.Field f : c.getDeclaredFields()) {
                    expect(Modifier.isStatic(f.getModifiers()) || Modifier.isFinal(f.getModifiers()), c.getSimpleName() + "." + f.getName());
                }
            }
            try {
                Class.forName("krabka.coordination.LeadershipEvent");
                throw new AssertionError("a second LeadershipEvent type");
            } catch (ClassNotFoundException expected) {
                // The record is EventRecord; LeadershipEvent is the sealed class.
            }
        });
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = System.getenv("KRABKA_BOOTSTRAP");
        String topic = args.length > 0 ? args[0] : "krabka-uniffi-results";
        String input = args.length > 1 ? args[1] : "krabka-uniffi-input";
        String role = "uniffi-java-" + ProcessHandle.current().pid() + "-" + System.currentTimeMillis();
        AcquireOptions timings = new AcquireOptions(3.0, 1.0, 0.5);
        Map<String, String> settings = Map.of("bootstrap.servers", bootstrap == null ? "127.0.0.1:1" : bootstrap);

        shapes();
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
                    expect(status.authoritative(FencingToken.parse(token.toString())), "the token's text names it");
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
                        // A blocking acquire with a timeout gives up, deregistered.
                        long t0 = System.nanoTime();
                        try (Client third = KrabkaJava.client(settings)) {
                            KrabkaJava.acquire(third, role, "java-c", timings, 1, TimeUnit.SECONDS);
                            throw new AssertionError("java-c acquired while java-a holds the role");
                        } catch (TimeoutException e) {
                            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                            expect(ms >= 900 && ms < 10_000, "gave up after " + ms + " ms");
                            expect(e.getMessage().contains("java-c"), e.getMessage());
                        }
                        expect(KrabkaJava.describeRoleState(client, role).getRoster().stream().noneMatch(r -> r.getMember().equals("java-c")),
                            "java-c still in the roster");
                        CompletableFuture<Void> resigned = KrabkaJava.resignAsync(a);
                        expect(resigned.get(20, TimeUnit.SECONDS) == null, "resignAsync completes with null");
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
                    CompletableFuture<Void> written = KrabkaJava.writeAsync(held[1], List.of(KrabkaJava.record(topic, "from java-b".getBytes())));
                    expect(written.get(20, TimeUnit.SECONDS) == null, "writeAsync completes with null");
                    KrabkaJava.resign(held[1]);
                    expect(!held[1].isHeld(), "b still held after resign");
                    TermEnd end = KrabkaJava.awaitEnd(held[1]);
                    expect(end.getKind().name().equals("RESIGNED") && end.getError() instanceof KrabkaException.Resigned, "b's end " + end);
                });
                check("the leader loop from Java: a term per win, the work's return hands over, cancel stops and resigns", () -> {
                    String loopRole = role + "-loop";
                    List<Long> terms = Collections.synchronizedList(new ArrayList<>());
                    CountDownLatch second = new CountDownLatch(2);
                    boolean[] sawEnd = new boolean[1];
                    LeaderWork work = (leadership, term) -> {
                        terms.add(term.number());
                        KrabkaJava.write(leadership, List.of(KrabkaJava.record(topic, ("term " + term.number()).getBytes())));
                        if (term.number() == 1) {
                            second.countDown();
                            return; // returning hands the role over
                        }
                        expect(leadership.isHeld() && !term.isEnded(), "held while not ended");
                        second.countDown();
                        try {
                            while (!term.awaitEnd(100, TimeUnit.MILLISECONDS)) {
                                // a unit of work per pass
                            }
                        } catch (InterruptedException e) {
                            // The loop stopping interrupts the work's thread.
                        }
                        sawEnd[0] = true;
                    };
                    CompletableFuture<Void> loop = KrabkaJava.leadAsync(client, loopRole, "java-lead", timings, work);
                    expect(second.await(30, TimeUnit.SECONDS), "terms " + terms);
                    expect(terms.equals(List.of(1L, 2L)), "terms " + terms);
                    expect(loop.cancel(true) && loop.isCancelled(), "cancel");
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                    RoleState state = KrabkaJava.describeRoleState(client, loopRole);
                    while ((state.getLease() != null || !state.getRoster().isEmpty()) && System.nanoTime() < deadline) {
                        Thread.sleep(100);
                        state = KrabkaJava.describeRoleState(client, loopRole);
                    }
                    expect(state.getLease() == null && state.getRoster().isEmpty(), "after cancel: " + state);
                    expect(sawEnd[0], "the running work did not see its term end");
                    // A work that throws ends the blocking loop with it, after a resign.
                    try {
                        KrabkaJava.lead(client, loopRole, "java-lead", timings, (leadership, term) -> {
                            throw new IllegalStateException("work failed in term " + term.number());
                        });
                        throw new AssertionError("lead returned");
                    } catch (ExecutionException e) {
                        expect(e.getCause() instanceof IllegalStateException && e.getCause().getMessage().equals("work failed in term 1"), "cause " + e.getCause());
                    }
                    expect(KrabkaJava.describeRoleState(client, loopRole).getLease() == null, "resigned after the work threw");
                });
                check("a write with offsets (blocking, then as a future) commits the group's offsets; committedOffsets returns them; bad offsets are InvalidArgument", () -> {
                    String group = role + "-java-group";
                    List<InputPartitions> asked = List.of(new InputPartitions(input, List.of(0, 1)));
                    try (Leadership l = KrabkaJava.acquire(client, role + "-java-offsets", "java-o", timings)) {
                        List<CommittedOffset> none = KrabkaJava.committedOffsets(l, group, asked);
                        expect(none.equals(List.of(new CommittedOffset(input, 0, null, null), new CommittedOffset(input, 1, null, null))), "before: " + none);
                        KrabkaJava.writeWithOffsets(l, List.of(KrabkaJava.record(topic, "java out 1".getBytes())),
                            new ConsumedOffsets(group, List.of(KrabkaJava.inputOffset(input, 0, 2L), new InputOffset(input, 1, 4L, "java"))));
                        List<CommittedOffset> found = KrabkaJava.committedOffsets(l, group, asked);
                        expect(found.size() == 2 && at(found.get(0), input, 0, 2L) && at(found.get(1), input, 1, 4L)
                            && "java".equals(found.get(1).getMetadata()), "after: " + found);
                        CompletableFuture<Void> written = KrabkaJava.writeWithOffsetsAsync(l, List.of(KrabkaJava.record(topic, "java out 2".getBytes())),
                            new ConsumedOffsets(group, List.of(KrabkaJava.inputOffset(input, 0, 3L))));
                        expect(written.get(20, TimeUnit.SECONDS) == null, "writeWithOffsetsAsync completes with null");
                        List<CommittedOffset> moved = KrabkaJava.committedOffsetsAsync(l, group, List.of(new InputPartitions(input, List.of(0)))).get(20, TimeUnit.SECONDS);
                        expect(moved.size() == 1 && at(moved.get(0), input, 0, 3L), "as a future: " + moved);
                        try {
                            KrabkaJava.writeWithOffsets(l, List.of(), new ConsumedOffsets("", List.of(KrabkaJava.inputOffset(input, 0, 9L))));
                            throw new AssertionError("a write with an empty group was sent");
                        } catch (KrabkaException.InvalidArgument e) {
                            expect(e.getDetail().contains("consumer group") && e.getDetail().contains("empty"), e.getDetail());
                        }
                        try {
                            KrabkaJava.writeWithOffsetsAsync(l, List.of(), new ConsumedOffsets(group, List.of(KrabkaJava.inputOffset(input, 0, -1L)))).get(10, TimeUnit.SECONDS);
                            throw new AssertionError("the future of a write with a negative offset completed");
                        } catch (ExecutionException e) {
                            expect(e.getCause() instanceof KrabkaException.InvalidArgument && ((KrabkaException.InvalidArgument) e.getCause()).getDetail().contains("offset -1"), "cause " + e.getCause());
                        }
                        List<CommittedOffset> kept = KrabkaJava.committedOffsets(l, group, List.of(new InputPartitions(input, List.of(0))));
                        expect(kept.size() == 1 && at(kept.get(0), input, 0, 3L), "a refused write moved the offset: " + kept);
                        KrabkaJava.resign(l);
                        try {
                            KrabkaJava.writeWithOffsets(l, List.of(), new ConsumedOffsets(group, List.of(KrabkaJava.inputOffset(input, 0, 9L))));
                            throw new AssertionError("a write with offsets after resign was sent");
                        } catch (KrabkaException.Resigned e) {
                            expect(!e.getDetail().isEmpty(), "resigned detail");
                        }
                    }
                });
                check("try-with-resources closes the client: its role is handed over at once, its pending acquire cancelled, later calls refused", () -> {
                    String closeRole = role + "-java-close";
                    String pendingRole = role + "-java-close-pending";
                    AcquireOptions slow = new AcquireOptions(15.0, 3.0, 0.5);
                    Leadership blocker = KrabkaJava.acquire(other, pendingRole, "java-x", slow);
                    CompletableFuture<Leadership> standby;
                    CompletableFuture<Leadership> pending;
                    Client closed;
                    long closedAt;
                    try (Client holder = KrabkaJava.client(settings)) {
                        closed = holder;
                        KrabkaJava.acquire(holder, closeRole, "java-holder", slow);
                        pending = KrabkaJava.acquireAsync(holder, pendingRole, "java-y", slow);
                        standby = KrabkaJava.acquireAsync(other, closeRole, "java-standby", slow);
                        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                        while (System.nanoTime() < deadline
                            && (KrabkaJava.describeRoleState(other, closeRole).getRoster().size() < 2
                                || KrabkaJava.describeRoleState(other, pendingRole).getRoster().size() < 2)) {
                            Thread.sleep(100);
                        }
                        expect(!standby.isDone() && !pending.isDone(), "both wait behind their holders");
                        closedAt = System.nanoTime();
                    }
                    Leadership b = standby.get(30, TimeUnit.SECONDS);
                    double took = (System.nanoTime() - closedAt) / 1e9;
                    expect(took < 5.0, "the standby took over " + took + " s after the close, the lease is 15 s");
                    try {
                        pending.get(5, TimeUnit.SECONDS);
                        throw new AssertionError("the pending acquire won on a closed client");
                    } catch (ExecutionException e) {
                        expect(e.getCause() instanceof KrabkaException.Cancelled, "pending acquire: " + e.getCause());
                    }
                    try {
                        KrabkaJava.describeRoleState(closed, closeRole);
                        throw new AssertionError("a closed client answered");
                    } catch (KrabkaException.InvalidArgument e) {
                        expect(e.getDetail().equals("the client is closed"), e.getDetail());
                    }
                    KrabkaJava.resign(b);
                    b.close();
                    KrabkaJava.resign(blocker);
                    blocker.close();
                });
                for (Leadership l : held) if (l != null) l.close();
            }
        }
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
