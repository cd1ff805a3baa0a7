// Checks golden/partitions.json against Kafka's own Java code (kafka-clients):
// Utils.murmur2, Utils.toPositive and BuiltInPartitioner.partitionForKey, the
// path a Java producer takes for a keyed record.
//
// Usage: java -cp kafka-clients.jar:slf4j-api.jar:<classes> Murmur2Check golden/partitions.json
//
// Prints one line per case, "index<TAB>murmur2<TAB>partitions<TAB>partition",
// as Kafka computes them from the role (UTF-8 bytes of the JSON string), then a
// summary on stderr. ci/golden.sh compares the lines with the file's numbers.
// Exits 1 when Kafka disagrees with the file, 2 on unreadable input.

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.utils.Utils;

public final class Murmur2Check {
    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: Murmur2Check golden/partitions.json");
            System.exit(2);
        }
        String text = Files.readString(Path.of(args[0]), StandardCharsets.UTF_8);
        Object root = new Json(text).document();
        Map<?, ?> file = (Map<?, ?>) root;
        if (!Long.valueOf(1).equals(file.get("format"))) {
            System.err.println("unknown format " + file.get("format"));
            System.exit(2);
        }
        List<?> cases = (List<?>) file.get("cases");
        int mismatches = 0;
        int maskDiffersFromAbs = 0;
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < cases.size(); i++) {
            Map<?, ?> c = (Map<?, ?>) cases.get(i);
            String role = (String) c.get("role");
            int n = ((Long) c.get("partitions")).intValue();
            byte[] key = role.getBytes(StandardCharsets.UTF_8);
            int h = Utils.murmur2(key);
            int p = BuiltInPartitioner.partitionForKey(key, n);
            if (p != Utils.toPositive(h) % n) {
                throw new AssertionError("partitionForKey is not toPositive(murmur2) % n for case " + i);
            }
            if (h < 0 && Math.abs(h) % n != p) {
                maskDiffersFromAbs++;
            }
            long fileHash = (Long) c.get("murmur2");
            long filePartition = (Long) c.get("partition");
            if (fileHash != h || filePartition != p) {
                mismatches++;
                System.err.printf("case %d role %s partitions %d: kafka murmur2 %d partition %d, file %d %d%n",
                        i, role, n, h, p, fileHash, filePartition);
            }
            out.append(i).append('\t').append(h).append('\t').append(n).append('\t').append(p).append('\n');
        }
        System.out.print(out);
        System.err.printf("Murmur2Check: %d cases, %d disagree with Kafka %s; %d where Math.abs would pick another partition%n",
                cases.size(), mismatches, org.apache.kafka.common.utils.AppInfoParser.getVersion(), maskDiffersFromAbs);
        System.exit(mismatches == 0 ? 0 : 1);
    }

    /** A small strict JSON reader: objects, arrays, strings, integers, true, false, null. */
    static final class Json {
        private final String s;
        private int i;

        Json(String s) {
            this.s = s;
        }

        Object document() {
            Object v = value();
            ws();
            if (i != s.length()) throw error("trailing text");
            return v;
        }

        private RuntimeException error(String what) {
            return new IllegalArgumentException(what + " at character " + i);
        }

        private void ws() {
            while (i < s.length() && " \t\r\n".indexOf(s.charAt(i)) >= 0) i++;
        }

        private void expect(char c) {
            ws();
            if (i >= s.length() || s.charAt(i) != c) throw error("expected '" + c + "'");
            i++;
        }

        private Object value() {
            ws();
            if (i >= s.length()) throw error("unexpected end");
            char c = s.charAt(i);
            if (c == '{') {
                Map<String, Object> m = new LinkedHashMap<>();
                i++;
                ws();
                if (s.charAt(i) == '}') { i++; return m; }
                while (true) {
                    ws();
                    String k = string();
                    expect(':');
                    m.put(k, value());
                    ws();
                    if (s.charAt(i) == ',') { i++; continue; }
                    expect('}');
                    return m;
                }
            }
            if (c == '[') {
                List<Object> a = new ArrayList<>();
                i++;
                ws();
                if (s.charAt(i) == ']') { i++; return a; }
                while (true) {
                    a.add(value());
                    ws();
                    if (s.charAt(i) == ',') { i++; continue; }
                    expect(']');
                    return a;
                }
            }
            if (c == '"') return string();
            if (s.startsWith("true", i)) { i += 4; return Boolean.TRUE; }
            if (s.startsWith("false", i)) { i += 5; return Boolean.FALSE; }
            if (s.startsWith("null", i)) { i += 4; return null; }
            int start = i;
            if (c == '-') i++;
            while (i < s.length() && Character.isDigit(s.charAt(i))) i++;
            if (i == start || (i < s.length() && ".eE".indexOf(s.charAt(i)) >= 0)) throw error("not an integer");
            return Long.parseLong(s.substring(start, i));
        }

        private String string() {
            if (s.charAt(i) != '"') throw error("expected a string");
            i++;
            StringBuilder b = new StringBuilder();
            while (true) {
                if (i >= s.length()) throw error("unterminated string");
                char c = s.charAt(i++);
                if (c == '"') return b.toString();
                if (c < 0x20) throw error("control character in a string");
                if (c != '\\') { b.append(c); continue; }
                char e = s.charAt(i++);
                switch (e) {
                    case '"': b.append('"'); break;
                    case '\\': b.append('\\'); break;
                    case '/': b.append('/'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'n': b.append('\n'); break;
                    case 'r': b.append('\r'); break;
                    case 't': b.append('\t'); break;
                    case 'u':
                        // Surrogate pairs arrive as two escapes and join in the UTF-16 string.
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        i += 4;
                        break;
                    default: throw error("bad escape \\" + e);
                }
            }
        }
    }
}
