// The JDBC fence from plain Java: KrabkaFence's static entry points
// (migrate, fence with a Leadership and a Client) on an SQLite file and the
// real PostgreSQL (KRABKA_POSTGRES_JDBC), with leaderships on the real Kafka
// (KRABKA_BOOTSTRAP): a leader writes, a second member takes over after
// resign and writes, and the deposed leader's next transaction is refused
// with the checked KrabkaException.Fenced, its write rolled back.
//
// Usage: java ... krabka.coordination.javatest.JavaFence
// Ends with "N passed, N failed"; exits 1 on any failure or missing setting.
package krabka.coordination.javatest;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import krabka.coordination.AcquireOptions;
import krabka.coordination.Client;
import krabka.coordination.KrabkaException;
import krabka.coordination.KrabkaJava;
import krabka.coordination.Leadership;
import krabka.coordination.TopicOptions;
import krabka.coordination.jdbc.KrabkaFence;

public final class JavaFence {
    private JavaFence() {}

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

    /** A transaction on a new connection: the fence of the leadership, then one write. */
    static void write(String url, Leadership leadership, Client client, String writer) throws SQLException, KrabkaException {
        try (Connection db = DriverManager.getConnection(url)) {
            db.setAutoCommit(false);
            try {
                KrabkaFence.fence(db, leadership, client);
                try (PreparedStatement s = db.prepareStatement("INSERT INTO java_fence_writes (role, writer) VALUES (?, ?)")) {
                    s.setString(1, leadership.role());
                    s.setString(2, writer);
                    s.executeUpdate();
                }
                db.commit();
            } catch (SQLException | KrabkaException | RuntimeException e) {
                db.rollback();
                throw e;
            }
        }
    }

    static List<String> writes(String url, String role) throws SQLException {
        List<String> out = new ArrayList<>();
        try (Connection db = DriverManager.getConnection(url);
             PreparedStatement s = db.prepareStatement("SELECT writer FROM java_fence_writes WHERE role = ? ORDER BY writer")) {
            s.setString(1, role);
            try (ResultSet r = s.executeQuery()) {
                while (r.next()) out.add(r.getString(1));
            }
        }
        return out;
    }

    static void store(String name, String url, String bootstrap) {
        String role = "uniffi-java-fence-" + name.toLowerCase(java.util.Locale.ROOT) + "-" + ProcessHandle.current().pid() + "-" + System.currentTimeMillis();
        AcquireOptions timings = new AcquireOptions(3.0, 1.0, 0.5);
        check(name + ": a deposed leader's transaction is refused with KrabkaException.Fenced, its write rolled back", () -> {
            try (Connection db = DriverManager.getConnection(url); java.sql.Statement s = db.createStatement()) {
                KrabkaFence.migrate(db);
                s.execute("CREATE TABLE IF NOT EXISTS java_fence_writes (role TEXT NOT NULL, writer TEXT NOT NULL)");
            }
            try (Client client = KrabkaJava.client(Map.of("bootstrap.servers", bootstrap));
                 Client other = KrabkaJava.client(Map.of("bootstrap.servers", bootstrap))) {
                KrabkaJava.ensureStateTopic(client, new TopicOptions(true, null, null));
                Leadership a = KrabkaJava.acquire(client, role, "member-a", timings);
                write(url, a, client, "a-1");
                KrabkaJava.resign(a);
                Leadership b = KrabkaJava.acquire(other, role, "member-b", timings);
                write(url, b, other, "b-1");
                try {
                    write(url, a, client, "a-late");
                    throw new AssertionError("the deposed leader's transaction committed");
                } catch (KrabkaException.Fenced e) {
                    expect(e.getDetail().contains(b.token().toString()) && e.getDetail().contains(a.token().toString()), e.getDetail());
                }
                expect(writes(url, role).equals(List.of("a-1", "b-1")), "writes " + writes(url, role));
                KrabkaJava.resign(b);
                a.close();
                b.close();
            }
        });
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = System.getenv("KRABKA_BOOTSTRAP");
        String postgres = System.getenv("KRABKA_POSTGRES_JDBC");
        if (bootstrap == null || bootstrap.isEmpty() || postgres == null || postgres.isEmpty()) {
            System.out.println("KRABKA_BOOTSTRAP and KRABKA_POSTGRES_JDBC must be set: the fence tests need a Kafka and a PostgreSQL");
            System.exit(1);
        }
        check("KrabkaFence's entry points are static, named as written", () -> {
            Method fence = KrabkaFence.class.getMethod("fence", Connection.class, Leadership.class, Client.class);
            Method migrate = KrabkaFence.class.getMethod("migrate", Connection.class);
            expect(Modifier.isStatic(fence.getModifiers()) && Modifier.isStatic(migrate.getModifiers()), "not static");
            expect(List.of(fence.getExceptionTypes()).contains(KrabkaException.class), "fence does not declare KrabkaException");
        });
        Path dir = Files.createTempDirectory("krabka-java-fence");
        try {
            store("SQLite", "jdbc:sqlite:" + dir.resolve("fence.db"), bootstrap);
            store("PostgreSQL", postgres, bootstrap);
        } finally {
            try (var files = Files.walk(dir)) {
                files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
