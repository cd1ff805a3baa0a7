// The uniffi binding's tests on the JVM, run by ci/uniffi.sh: every golden
// vector (counted per file, like the other bindings' suites), every malformed
// entry with its part, refused arguments with their messages, and leadership
// on a real Kafka when KRABKA_BOOTSTRAP is set (acquire, the token, describe,
// a guarded write, resign, a second member takes over, a cancelled acquire,
// a deposed leader's write refused as Fenced), and the observer (a hand-over
// and the crash of a member process killed with SIGKILL, seen in order; the
// standby's waiting event naming the holder; the Flow; refused roles).
//
// Usage: java ... krabka.coordination.test.MainKt GOLDEN_DIR
// Ends with "N passed, N failed"; exits 1 on any failure.
// (MainKt --member BOOTSTRAP ROLE MEMBER is the member process the observer
// test starts: it acquires, prints ELECTED <producer id> <epoch>, and waits
// to be killed.)
package krabka.coordination.test

import krabka.coordination.*
import kotlinx.coroutines.*
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.flow.onEach
import kotlinx.coroutines.flow.toList
import krabka.coordination.events.asFlow
import krabka.coordination.events.eventFlow
import krabka.coordination.events.toEvent
import java.io.File
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.TimeUnit

// ---- a minimal JSON reader (the golden files are plain JSON) ----

class Json(private val s: String) {
    private var i = 0

    fun parse(): Any? {
        val v = value()
        ws()
        require(i == s.length) { "trailing characters at $i" }
        return v
    }

    private fun ws() {
        while (i < s.length && s[i].isWhitespace()) i++
    }

    private fun value(): Any? {
        ws()
        return when (s[i]) {
            '{' -> obj()
            '[' -> arr()
            '"' -> str()
            't' -> { expect("true"); true }
            'f' -> { expect("false"); false }
            'n' -> { expect("null"); null }
            else -> num()
        }
    }

    private fun expect(word: String) {
        require(s.startsWith(word, i)) { "expected $word at $i" }
        i += word.length
    }

    private fun obj(): Map<String, Any?> {
        val m = LinkedHashMap<String, Any?>()
        i++
        ws()
        if (s[i] == '}') { i++; return m }
        while (true) {
            ws()
            val k = str()
            ws(); expect(":")
            m[k] = value()
            ws()
            if (s[i] == ',') { i++; continue }
            expect("}")
            return m
        }
    }

    private fun arr(): List<Any?> {
        val l = ArrayList<Any?>()
        i++
        ws()
        if (s[i] == ']') { i++; return l }
        while (true) {
            l.add(value())
            ws()
            if (s[i] == ',') { i++; continue }
            expect("]")
            return l
        }
    }

    private fun str(): String {
        expect("\"")
        val b = StringBuilder()
        while (s[i] != '"') {
            val c = s[i++]
            if (c != '\\') { b.append(c); continue }
            when (val e = s[i++]) {
                'n' -> b.append('\n'); 't' -> b.append('\t'); 'r' -> b.append('\r')
                'b' -> b.append('\b'); 'f' -> b.append('\u000c')
                'u' -> { b.append(s.substring(i, i + 4).toInt(16).toChar()); i += 4 }
                else -> b.append(e)
            }
        }
        i++
        return b.toString()
    }

    private fun num(): Long {
        val start = i
        while (i < s.length && (s[i] == '-' || s[i].isDigit())) i++
        return s.substring(start, i).toLong()
    }
}

@Suppress("UNCHECKED_CAST")
fun Any?.obj() = this as Map<String, Any?>
@Suppress("UNCHECKED_CAST")
fun Any?.list() = this as List<Any?>
fun Map<String, Any?>.str(k: String) = this[k] as String
fun Map<String, Any?>.int(k: String) = (this[k] as Long).toInt()
// i64 fields are JSON strings of decimal digits.
fun Map<String, Any?>.i64(k: String) = (this[k] as String).toLong()

fun hex(s: String): ByteArray = ByteArray(s.length / 2) { s.substring(2 * it, 2 * it + 2).toInt(16).toByte() }
fun ByteArray.hex(): String = joinToString("") { "%02x".format(it) }

// ---- the harness ----

var passed = 0
var failed = 0

fun check(name: String, block: () -> Unit) {
    try {
        block()
        passed++
        println("ok   $name")
    } catch (e: Throwable) {
        failed++
        println("FAIL $name: $e")
    }
}

fun expect(cond: Boolean, what: () -> String) {
    if (!cond) throw AssertionError(what())
}

inline fun <reified E : Throwable> throws(block: () -> Unit): E {
    try {
        block()
    } catch (e: Throwable) {
        if (e is E) return e
        throw AssertionError("threw ${e::class.simpleName}: $e, not ${E::class.simpleName}")
    }
    throw AssertionError("did not throw ${E::class.simpleName}")
}

// ---- golden vectors ----

fun load(dir: File, name: String): Map<String, Any?> {
    val d = Json(File(dir, name).readText()).parse().obj()
    expect(d["format"] == 1L) { "$name: unsupported format ${d["format"]}" }
    return d
}

fun expectedValue(c: Map<String, Any?>): Any = when (c.str("part")) {
    "key" -> Key(if (c.str("kind") == "registration") KeyKind.REGISTRATION else KeyKind.LEASE, c.str("role"), c.str("member"))
    "registration value" -> Registration(c.str("member"), c.i64("registered_at"))
    "lease value" -> Lease(c.str("member"), FencingToken(c.i64("producer_id"), c.int("producer_epoch").toShort()), c.i64("granted_at"), c.i64("deadline"))
    else -> throw AssertionError("unknown part ${c["part"]}")
}

fun decode(part: String, data: ByteArray): Any = when (part) {
    "key" -> decodeKey(data)
    "registration value" -> decodeRegistration(data)
    "lease value" -> decodeLease(data)
    else -> throw AssertionError("unknown part $part")
}

fun encode(v: Any): ByteArray = when (v) {
    is Key -> encodeKey(v)
    is Registration -> encodeRegistration(v)
    is Lease -> encodeLease(v)
    else -> throw AssertionError("not a record value: $v")
}

fun golden(dir: File) {
    val parts = listOf("key", "registration value", "lease value")
    check("records.json: every case decodes and encodes exactly") {
        val cases = load(dir, "records.json")["cases"].list()
        expect(cases.isNotEmpty()) { "records.json has no cases" }
        val perPart = parts.associateWith { 0 }.toMutableMap()
        val failures = mutableListOf<String>()
        for (c in cases.map { it.obj() }) {
            try {
                val want = expectedValue(c)
                val got = decode(c.str("part"), hex(c.str("hex")))
                expect(got == want) { "decoded $got" }
                val bytes = encode(want)
                expect(bytes.hex() == c.str("hex")) { "encoded ${bytes.hex()}" }
                perPart[c.str("part")] = perPart.getValue(c.str("part")) + 1
            } catch (e: Throwable) {
                failures.add("${c["name"]}: $e")
            }
        }
        expect(failures.isEmpty()) { failures.joinToString("; ") }
        expect(perPart.values.sum() == cases.size) { "checked ${perPart.values.sum()} of ${cases.size}" }
        expect(perPart.values.all { it > 0 }) { "a part has no cases: $perPart" }
        println("records.json: ${cases.size} of ${cases.size} cases checked (key ${perPart["key"]}, registration value ${perPart["registration value"]}, lease value ${perPart["lease value"]})")
    }
    check("records.json: every malformed entry is refused with its part") {
        val malformed = load(dir, "records.json")["malformed"].list()
        expect(malformed.isNotEmpty()) { "records.json has no malformed entries" }
        val perPart = parts.associateWith { 0 }.toMutableMap()
        val failures = mutableListOf<String>()
        for (m in malformed.map { it.obj() }) {
            val part = m.str("part")
            try {
                decode(part, hex(m.str("hex")))
                failures.add("${m["name"]}: decoded")
            } catch (e: KrabkaException) {
                val ok = when (part) {
                    "key" -> e is KrabkaException.MalformedKey
                    "registration value" -> e is KrabkaException.MalformedRegistration
                    else -> e is KrabkaException.MalformedLease
                }
                if (!ok || errorKind(e) != ErrorKind.FORMAT) {
                    failures.add("${m["name"]}: ${e::class.simpleName}, expected the $part case")
                } else {
                    perPart[part] = perPart.getValue(part) + 1
                }
            }
        }
        expect(failures.isEmpty()) { failures.joinToString("; ") }
        expect(perPart.values.sum() == malformed.size) { "checked ${perPart.values.sum()} of ${malformed.size}" }
        expect(perPart.values.all { it > 0 }) { "a part has no malformed entries: $perPart" }
        println("records.json: ${malformed.size} of ${malformed.size} malformed entries refused with their part (key ${perPart["key"]}, registration value ${perPart["registration value"]}, lease value ${perPart["lease value"]})")
    }
    check("partitions.json: murmur2 and the partition of every role") {
        val cases = load(dir, "partitions.json")["cases"].list().map { it.obj() }
        expect(cases.isNotEmpty()) { "partitions.json has no cases" }
        var checked = 0
        val failures = mutableListOf<String>()
        for (c in cases) {
            val hash = murmur2(c.str("role").toByteArray(Charsets.UTF_8))
            val p = rolePartition(c.str("role"), c.int("partitions"))
            if (hash != c.int("murmur2") || p != c.int("partition")) {
                failures.add("${c["role"]} in ${c["partitions"]}: murmur2 $hash partition $p")
            } else {
                checked++
            }
        }
        expect(failures.isEmpty()) { failures.take(20).joinToString("; ") }
        expect(checked == cases.size) { "checked $checked of ${cases.size}" }
        expect(cases.any { it.int("murmur2") < 0 }) { "a negative hash must be among the cases" }
        println("partitions.json: $checked of ${cases.size} cases checked")
    }
    check("tokens.json: the order of every pair, both ways") {
        val cases = load(dir, "tokens.json")["cases"].list().map { it.obj() }
        expect(cases.isNotEmpty()) { "tokens.json has no cases" }
        val want = mapOf("less" to -1, "equal" to 0, "greater" to 1)
        fun token(t: Map<String, Any?>) = FencingToken(t.i64("producer_id"), t.int("producer_epoch").toShort())
        var checked = 0
        val seen = mutableSetOf<String>()
        val failures = mutableListOf<String>()
        for (c in cases) {
            val a = token(c["a"].obj())
            val b = token(c["b"].obj())
            val order = c.str("order")
            val w = want.getValue(order)
            if (compareTokens(a, b).toInt() != w || compareTokens(b, a).toInt() != -w || (a == b) != (order == "equal")) {
                failures.add("$a vs $b: ${compareTokens(a, b)}, expected $order")
            } else {
                checked++
                seen.add(order)
            }
        }
        expect(failures.isEmpty()) { failures.joinToString("; ") }
        expect(checked == cases.size) { "checked $checked of ${cases.size}" }
        expect(seen == setOf("less", "equal", "greater")) { "orders seen: $seen" }
        expect(noEpoch() == FencingToken(-1L, (-1).toShort()) && isNoEpoch(noEpoch())) { "NO_EPOCH is (-1, -1)" }
        println("tokens.json: $checked of ${cases.size} cases checked")
    }
    check("a token's text is its wire form, parsed back by FencingToken.parse; Kotlin compares tokens") {
        val t = FencingToken(4001L, 7.toShort())
        expect(t.toString() == "4001/7" && FencingToken.NO_EPOCH.toString() == "NoEpoch") { "$t ${FencingToken.NO_EPOCH}" }
        expect(FencingToken.parse("4001/7") == t && FencingToken.parse("NoEpoch") == noEpoch()) { "parse" }
        expect(t < FencingToken(4002L, 0.toShort()) && FencingToken.NO_EPOCH < t && maxOf(t, FencingToken.NO_EPOCH) == t) { "order" }
        val (id, epoch) = t
        expect(id == 4001L && epoch == 7.toShort() && t.copy(producerEpoch = 8.toShort()) > t) { "destructuring, copy" }
        val e = throws<KrabkaException.InvalidArgument> { FencingToken.parse("4001:7") }
        expect(e.detail.startsWith("\"4001:7\" is not a fencing token")) { e.detail }
    }
}

// ---- refused arguments ----

fun arguments() {
    check("i64 fields keep 64 bits") {
        val l = Lease("m", FencingToken(Long.MAX_VALUE, Short.MAX_VALUE), Long.MIN_VALUE, -1L)
        expect(decodeLease(encodeLease(l)) == l) { "round trip of extreme values" }
    }
    check("encode refuses what the layout cannot hold, naming the part and field") {
        val e = throws<KrabkaException.Encode> { encodeKey(Key(KeyKind.REGISTRATION, "", "m")) }
        expect(e.part == "key" && e.field == "role") { "part ${e.part} field ${e.field}" }
        val e2 = throws<KrabkaException.Encode> { encodeKey(Key(KeyKind.LEASE, "orders", "m")) }
        expect(e2.part == "key" && e2.field == "member") { "part ${e2.part} field ${e2.field}" }
        val e3 = throws<KrabkaException.Encode> { encodeLease(Lease("x".repeat(40000), noEpoch(), 0, 0)) }
        expect(e3.part == "lease value" && e3.field == "member") { "part ${e3.part} field ${e3.field}" }
        expect(errorKind(e3) == ErrorKind.ENCODE) { "kind ${errorKind(e3)}" }
    }
    check("rolePartition refuses an empty role and a count below 1") {
        throws<KrabkaException.InvalidArgument> { rolePartition("", 16) }
        val e = throws<KrabkaException.InvalidArgument> { rolePartition("orders", 0) }
        expect(e.detail.contains("partitions")) { e.detail }
        expect(rolePartition("orders", 16) == 12) { "orders in 16" }
    }
    check("a client refuses bad settings and options with clear messages") {
        val e = throws<KrabkaException.InvalidArgument> { Client(mapOf()) }
        expect(e.detail.contains("bootstrap")) { e.detail }
        val e2 = throws<KrabkaException.InvalidArgument> { Client(mapOf("bootstrap.servers" to "127.0.0.1:1", "no.such.setting" to "1")) }
        expect(e2.detail.contains("no.such.setting")) { e2.detail }
        val e3 = throws<KrabkaException.InvalidArgument> { Client(mapOf("bootstrap.servers" to "127.0.0.1:1"), ClientOptions(partitions = 0)) }
        expect(e3.detail == "partitions must be an integer from 1 to 2147483647, got 0") { e3.detail }
        val e4 = throws<KrabkaException.InvalidArgument> { Client(mapOf("bootstrap.servers" to "127.0.0.1:1"), ClientOptions(connectTimeout = -1.0)) }
        expect(e4.detail == "connect_timeout must be a positive number of seconds, got -1") { e4.detail }
        // What a caller prints is the detail itself, not uniffi's `detail=...`.
        expect(e4.message == e4.detail) { "${e4.message}" }
        val e5 = throws<KrabkaException.Encode> { encodeKey(Key(KeyKind.REGISTRATION, "", "m")) }
        expect(e5.message?.startsWith("cannot encode key: role ") == true) { "${e5.message}" }
    }
    check("acquire refuses bad timings before any I/O") {
        Client(mapOf("bootstrap.servers" to "127.0.0.1:1"), ClientOptions(partitions = 4)).use { c ->
            expect(c.partitions() == 4) { "partitions ${c.partitions()}" }
            val e = throws<KrabkaException.InvalidArgument> {
                runBlocking { c.acquire("r", "m", AcquireOptions(leaseDuration = -1.0)) }
            }
            expect(e.detail == "lease_duration must be a positive number of seconds, got -1") { e.detail }
            val e2 = throws<KrabkaException.InvalidArgument> {
                runBlocking { c.acquire("r", "m", AcquireOptions(leaseDuration = 3.0, renewInterval = 10.0)) }
            }
            expect(e2.detail.contains("renew interval")) { e2.detail }
            val e3 = throws<KrabkaException.InvalidArgument> {
                runBlocking { c.ensureStateTopic(TopicOptions(replicationFactor = 1, minInsyncReplicas = 2)) }
            }
            expect(e3.detail == "min_insync_replicas must be an integer from 1 to 1, got 2") { e3.detail }
            c.close()
            expect(c.isClosed()) { "closed" }
            val e4 = throws<KrabkaException.InvalidArgument> { runBlocking { c.describeLeadership("r") } }
            expect(e4.detail == "the client is closed") { e4.detail }
        }
    }
}

// ---- leadership on a real Kafka ----

fun kafka(bootstrap: String, topic: String) = runBlocking {
    val settings = mapOf("bootstrap.servers" to bootstrap)
    val role = "uniffi-kotlin-test-${ProcessHandle.current().pid()}-${System.currentTimeMillis()}"
    val timings = AcquireOptions(leaseDuration = 3.0, renewInterval = 1.0, challengeStagger = 0.5)
    Client(settings).use { client ->
        check("the state topic exists (development shape)") {
            runBlocking {
                val r = client.ensureStateTopic(TopicOptions(development = true))
                expect(r.partitions == client.partitions() && r.cleanupPolicy == "compact") { "$r" }
            }
        }
        check("a role nobody took reports NO_EPOCH") {
            runBlocking {
                val status = client.describeLeadership(role)
                expect(isNoEpoch(status.token()) && !status.authoritative(status.token())) { "${status.token()}" }
            }
        }
        var first: Leadership? = null
        check("acquire: the token, describe agrees, role state shows the lease") {
            runBlocking {
                val a = client.acquire(role, "member-a", timings)
                first = a
                val token = a.token()
                expect(!isNoEpoch(token) && a.isHeld() && a.role() == role && a.member() == "member-a") { "$token" }
                expect(a.partition() == rolePartition(role, client.partitions())) { "partition ${a.partition()}" }
                expect(a.leaseLeft() > 0.0 && a.ended() == null) { "lease left ${a.leaseLeft()}" }
                val status = client.describeLeadership(role)
                expect(status.authoritative(token) && status.authoritative(token.toString())) { "describe ${status.token()} vs $token" }
                val state = client.describeRoleState(role)
                expect(state.lease?.member == "member-a" && state.lease?.token == token) { "$state" }
                expect(state.roster.any { it.member == "member-a" }) { "roster ${state.roster}" }
                println("member-a leads $role with token $token")
            }
        }
        check("a guarded write commits") {
            runBlocking {
                val a = first ?: throw AssertionError("no leadership")
                a.write(listOf(OutRecord(topic = topic, value = "from member-a".toByteArray(), key = role.toByteArray(),
                    headers = listOf(Header("token", a.token().toString().toByteArray())))))
            }
        }
        check("a second member takes over after resign; the old token is superseded") {
            runBlocking {
                val a = first ?: throw AssertionError("no leadership")
                val old = a.token()
                Client(settings).use { other ->
                    val second = async { other.acquire(role, "member-b", timings) }
                    // member-b registers and waits behind the holder.
                    inRoster(other, role, "member-b")
                    expect(!second.isCompleted) { "member-b must wait while member-a holds the role" }
                    val stream = a.events()
                    val events = async { drain(stream) }
                    a.resign()
                    val end = withTimeout(10_000) { a.awaitEnd() }
                    expect(end.kind == ErrorKind.RESIGNED && end.error is KrabkaException.Resigned) { "ended: $end" }
                    expect(!a.isHeld()) { "still held after resign" }
                    val kinds = withTimeout(10_000) { events.await() }.map { it.kind }
                    expect("resigned" in kinds && kinds.last() == "deregistered") { "member-a's events after subscribing: $kinds" }
                    val b = withTimeout(30_000) { second.await() }
                    val token = b.token()
                    expect(compareTokens(token, old).toInt() == 1) { "new token $token not after $old" }
                    val status = other.describeLeadership(role)
                    expect(status.authoritative(token) && !status.authoritative(old)) { "describe ${status.token()}" }
                    b.write(listOf(OutRecord(topic = topic, value = "from member-b".toByteArray())))
                    val late = throws<KrabkaException> { runBlocking { a.write(listOf(OutRecord(topic = topic, value = "late".toByteArray()))) } }
                    expect(late !is KrabkaException.InvalidArgument) { "a write after the term: $late" }
                    println("member-b took over with token $token; member-a's late write: ${late::class.simpleName}")
                    // A third member's acquire, cancelled while it waits, returns
                    // promptly and leaves the roster.
                    Client(settings).use { third ->
                        val waiting = launch { third.acquire(role, "member-c", timings) }
                        inRoster(other, role, "member-c")
                        withTimeout(10_000) { waiting.cancelAndJoin() }
                        withTimeout(20_000) {
                            while (other.describeRoleState(role).roster.any { it.member == "member-c" }) delay(200)
                        }
                    }
                    b.resign()
                    expect(b.ended()?.kind == ErrorKind.RESIGNED) { "b ended: ${b.ended()}" }
                    b.close()
                }
                a.close()
            }
        }
        check("close() of a held leadership resigns it: a standby takes over at once, not a lease later") {
            runBlocking {
                val slow = AcquireOptions(leaseDuration = 15.0, renewInterval = 3.0, challengeStagger = 0.5)
                val closing = "$role-close"
                val held = client.acquire(closing, "member-a", slow)
                val old = held.token()
                Client(settings).use { other ->
                    val second = async { other.acquire(closing, "member-b", slow) }
                    inRoster(other, closing, "member-b")
                    expect(!second.isCompleted) { "member-b must wait while member-a holds the role" }
                    val closedAt = System.nanoTime()
                    held.use { }   // what a `use { }` block does at its end
                    val b = withTimeout(30_000) { second.await() }
                    val took = (System.nanoTime() - closedAt) / 1e9
                    expect(took < 5.0) { "member-b took over ${"%.1f".format(took)} s after close(), the lease is 15 s" }
                    expect(compareTokens(b.token(), old).toInt() == 1) { "new token ${b.token()} not after $old" }
                    println("close() handed over in ${"%.2f".format(took)} s")
                    b.resign()
                    b.close()
                }
            }
        }
        check("closing a client ends everything it started: a standby takes over at once, a pending acquire is cancelled, a leader loop stops") {
            runBlocking {
                val slow = AcquireOptions(leaseDuration = 15.0, renewInterval = 3.0, challengeStagger = 0.5)
                val (held, pending, looped) = listOf("held", "pending", "loop").map { "$role-client-close-$it" }
                Client(settings).use { other ->
                    val blocker = other.acquire(pending, "member-x", slow)
                    val closing = Client(settings)
                    closing.acquire(held, "member-a", slow)
                    val waiting = async { runCatching { closing.acquire(pending, "member-y", slow) } }
                    val leading = CompletableDeferred<Unit>()
                    val loop = async(Dispatchers.IO) {
                        runCatching { closing.lead(looped, "member-l", slow) { leading.complete(Unit); awaitCancellation() } }
                    }
                    withTimeout(20_000) { leading.await() }
                    val standby = async { other.acquire(held, "member-b", slow) }
                    inRoster(other, held, "member-b")
                    inRoster(other, pending, "member-y")
                    val closedAt = System.nanoTime()
                    withContext(Dispatchers.IO) { closing.use { } }
                    val b = withTimeout(30_000) { standby.await() }
                    val took = (System.nanoTime() - closedAt) / 1e9
                    expect(took < 5.0) { "member-b took over ${"%.1f".format(took)} s after the client's close(), the lease is 15 s" }
                    println("the client's close() handed over in ${"%.2f".format(took)} s")
                    val acquired = withTimeout(5_000) { waiting.await() }
                    expect(acquired.exceptionOrNull() is KrabkaException.Cancelled) { "the pending acquire: $acquired" }
                    val led = withTimeout(5_000) { loop.await() }
                    expect(led.isSuccess || led.exceptionOrNull() is KrabkaException) { "the leader loop: $led" }
                    expect(closing.isClosed()) { "closed" }
                    val late = throws<KrabkaException.InvalidArgument> { runBlocking { closing.acquire(held, "member-a", slow) } }
                    expect(late.detail == "the client is closed") { late.detail }
                    closing.close()
                    b.resign(); b.close()
                    blocker.resign(); blocker.close()
                }
            }
        }
    }
}

// Waits (at most 20 s) until `member` is in the roster of `role`, as `client` reads it.
suspend fun inRoster(client: Client, role: String, member: String) = withTimeout(20_000) {
    while (client.describeRoleState(role).roster.none { it.member == member }) delay(100)
}

// Every event of a stream, to its end (the term's end).
suspend fun drain(stream: EventStream): List<EventRecord> {
    val out = mutableListOf<EventRecord>()
    while (true) out.add(stream.next() ?: return out)
}

// A newer epoch of the role, minted behind its holder's back with Kafka's
// own tool (`kafka-transactions.sh forceTerminateTransaction`, through
// ci/kafka.sh): the holder is now deposed without knowing it.
fun mintNewerEpoch(bootstrap: String, role: String) {
    val root = System.getenv("KRABKA_ROOT") ?: throw AssertionError("KRABKA_ROOT is not set (ci/uniffi.sh sets it)")
    val p = ProcessBuilder("bash", "$root/ci/kafka.sh", "tool", "transactions", "--bootstrap-server", bootstrap,
        "forceTerminateTransaction", "--transactionalId", role).redirectErrorStream(true).start()
    val out = p.inputStream.readBytes().decodeToString()
    expect(p.waitFor() == 0) { "forceTerminateTransaction failed: $out" }
}

fun fenced(bootstrap: String, topic: String) = runBlocking {
    val role = "uniffi-kotlin-fenced-${ProcessHandle.current().pid()}-${System.currentTimeMillis()}"
    // A 30 s lease renewed every 10 s: no renewal meets the newer epoch
    // first; the guarded write does.
    val timings = AcquireOptions(leaseDuration = 30.0, renewInterval = 10.0, challengeStagger = 0.5)
    Client(mapOf("bootstrap.servers" to bootstrap)).use { client ->
        check("a deposed leader's guarded write fails with Fenced, and the term ends fenced") {
            runBlocking {
                val a = client.acquire(role, "member-a", timings)
                val token = a.token()
                val events = async { drain(a.events()) }
                a.write(listOf(OutRecord(topic = topic, value = "before".toByteArray())))
                mintNewerEpoch(bootstrap, role)
                val status = client.describeLeadership(role)
                expect(!status.authoritative(token) && compareTokens(status.token(), token).toInt() == 1) {
                    "describe ${status.token()} after minting past $token"
                }
                val e = throws<KrabkaException.Fenced> {
                    runBlocking { a.write(listOf(OutRecord(topic = topic, value = "after".toByteArray()))) }
                }
                expect(errorKind(e) == ErrorKind.FENCED && !isRetryable(ErrorKind.FENCED)) { "kind ${errorKind(e)}" }
                val end = withTimeout(10_000) { a.awaitEnd() }
                expect(end.kind == ErrorKind.FENCED && end.error is KrabkaException.Fenced) { "ended: $end" }
                expect(!a.isHeld()) { "still held after the fence" }
                val seen = withTimeout(10_000) { events.await() }
                val fence = seen.lastOrNull { it.kind == "fenced" }
                expect(fence != null && fence.error is KrabkaException.Fenced) { "events: ${seen.map { it.kind }}" }
                println("member-a fenced: ${e.detail}")
                a.close()
            }
        }
    }
}

// ---- exactly-once input: offsets in the guarded transaction ----

// A committed offset as (topic, partition, offset, metadata), with no
// metadata as null: Kafka answers an offset committed without metadata
// with an empty string, the test kit with none.
fun CommittedOffset.seen() = listOf(topic, partition, offset, metadata?.ifEmpty { null })

fun offsets(bootstrap: String, output: String, input: String) = runBlocking {
    val run = "${ProcessHandle.current().pid()}-${System.currentTimeMillis()}"
    val group = "uniffi-kotlin-group-$run"
    val both = listOf(InputPartitions(input, listOf(0, 1)))
    // A 30 s lease renewed every 10 s: no renewal meets the newer epoch
    // first; the guarded write does.
    val timings = AcquireOptions(leaseDuration = 30.0, renewInterval = 10.0, challengeStagger = 0.5)
    Client(mapOf("bootstrap.servers" to bootstrap)).use { client ->
        // Reads the group's offsets through a leadership of a role of its own.
        val reader = client.acquire("uniffi-kotlin-offsets-reader-$run", "reader", timings)
        check("a write with offsets commits the group's offsets with the records; committedOffsets returns them in the order asked") {
            runBlocking {
                val before = reader.committedOffsets(group, both)
                expect(before == listOf(CommittedOffset(input, 0, null, null), CommittedOffset(input, 1, null, null))) { "before: $before" }
                val a = client.acquire("uniffi-kotlin-offsets-$run", "member-a", timings)
                a.writeWithOffsets(
                    listOf(OutRecord(topic = output, value = "out of 4".toByteArray())),
                    ConsumedOffsets(group, listOf(InputOffset(input, 1, 7), InputOffset(input, 0, 5, "after 4"))),
                )
                val after = a.committedOffsets(group, both)
                expect(after.map { it.seen() } == listOf(listOf(input, 0, 5L, "after 4"), listOf(input, 1, 7L, null))) { "after: $after" }
                a.writeWithOffsets(listOf(), ConsumedOffsets(group, listOf(InputOffset(input, 0, 6))))
                val moved = reader.committedOffsets(group, listOf(InputPartitions(input, listOf(0))))
                expect(moved.map { it.seen() } == listOf(listOf(input, 0, 6L, null))) { "offsets only: $moved" }
                a.resign()
                val e = throws<KrabkaException.Resigned> {
                    runBlocking { a.writeWithOffsets(listOf(), ConsumedOffsets(group, listOf(InputOffset(input, 0, 9)))) }
                }
                println("a write with offsets after resign: ${e.detail}")
            }
        }
        check("a deposed leader's write with offsets fails with Fenced and the group's offset does not move") {
            runBlocking {
                val role = "uniffi-kotlin-offsets-fenced-$run"
                val fencedGroup = "$group-fenced"
                val a = client.acquire(role, "member-a", timings)
                a.writeWithOffsets(listOf(OutRecord(topic = output, value = "before".toByteArray())),
                    ConsumedOffsets(fencedGroup, listOf(InputOffset(input, 0, 3))))
                mintNewerEpoch(bootstrap, role)
                val e = throws<KrabkaException.Fenced> {
                    runBlocking {
                        a.writeWithOffsets(listOf(OutRecord(topic = output, value = "after".toByteArray())),
                            ConsumedOffsets(fencedGroup, listOf(InputOffset(input, 0, 9))))
                    }
                }
                val end = withTimeout(10_000) { a.awaitEnd() }
                expect(end.kind == ErrorKind.FENCED) { "ended: $end" }
                val found = reader.committedOffsets(fencedGroup, listOf(InputPartitions(input, listOf(0))))
                expect(found.map { it.seen() } == listOf(listOf(input, 0, 3L, null))) { "the deposed leader's offset moved: $found" }
                println("write with offsets fenced: ${e.detail}")
                a.close()
            }
        }
        check("bad offsets are InvalidArgument naming the value, nothing sent") {
            runBlocking {
                val out = listOf(OutRecord(topic = output, value = "never".toByteArray()))
                val empty = throws<KrabkaException.InvalidArgument> {
                    runBlocking { reader.writeWithOffsets(out, ConsumedOffsets("", listOf(InputOffset(input, 0, 1)))) }
                }
                expect(empty.detail.contains("consumer group") && empty.detail.contains("empty")) { empty.detail }
                val negative = throws<KrabkaException.InvalidArgument> {
                    runBlocking { reader.writeWithOffsets(out, ConsumedOffsets(group, listOf(InputOffset(input, 0, -1)))) }
                }
                expect(negative.detail.contains("offset -1") && negative.detail.contains("negative")) { negative.detail }
                val query = throws<KrabkaException.InvalidArgument> {
                    runBlocking { reader.committedOffsets(group, listOf(InputPartitions(input, listOf(0, -2)))) }
                }
                expect(query.detail.contains("partition -2")) { query.detail }
                val noGroup = throws<KrabkaException.InvalidArgument> { runBlocking { reader.committedOffsets("", both) } }
                expect(noGroup.detail.contains("consumer group")) { noGroup.detail }
                expect(reader.isHeld()) { "a refused call ended the term: ${reader.ended()}" }
                val kept = reader.committedOffsets(group, listOf(InputPartitions(input, listOf(0))))
                expect(kept.map { it.seen() } == listOf(listOf(input, 0, 6L, null))) { "a refused write moved the offset: $kept" }
            }
        }
        reader.resign()
    }
}

// ---- a cancelled next() loses no event ----

fun cancelledNext(bootstrap: String) = runBlocking {
    val role = "uniffi-kotlin-cancel-${ProcessHandle.current().pid()}-${System.currentTimeMillis()}"
    // A 30 s lease renewed every 10 s: no renewal within the check, so the
    // only events after the win are the resign's.
    val slow = AcquireOptions(leaseDuration = 30.0, renewInterval = 10.0, challengeStagger = 0.5)
    Client(mapOf("bootstrap.servers" to bootstrap)).use { client ->
        check("a next() cancelled while it waits loses no event (AcquireEvents and EventStream)") {
            runBlocking {
                val events = AcquireEvents()
                val a = client.acquire(role, "a", slow, events)
                val kinds = mutableListOf<String>()
                // The acquire's events up to the win, then a next() that waits
                // and is cancelled (nothing comes while the term is quiet).
                while (true) {
                    val e = withTimeoutOrNull(1_000) { events.next() ?: throw AssertionError("ended: $kinds") } ?: break
                    kinds.add(e.kind)
                }
                expect(kinds.first() == "registered" && kinds.last() == "elected") { "the acquire's events $kinds" }
                val stream = a.events()
                expect(withTimeoutOrNull(300) { stream.next() } == null) { "an event of a quiet term" }
                // The resign's events come to the next calls, none to the cancelled ones.
                a.resign()
                val afterA = withTimeout(10_000) { listOf(events.next()?.kind, events.next()?.kind, events.next()?.kind) }
                expect(afterA == listOf("resigned", "deregistered", null)) { "AcquireEvents after the cancelled next(): $afterA" }
                val afterS = withTimeout(10_000) { drain(stream).map { it.kind } }
                expect(afterS == listOf("resigned", "deregistered")) { "EventStream after the cancelled next(): $afterS" }
                a.close()
            }
        }
    }
}

// ---- the observer on a real Kafka ----

val SHORT = AcquireOptions(leaseDuration = 3.0, renewInterval = 1.0, challengeStagger = 0.5)

// The member process: acquires `role` as `member`, prints its token once
// elected, and waits to be killed.
fun memberChild(bootstrap: String, role: String, member: String) {
    runBlocking {
        val client = Client(mapOf("bootstrap.servers" to bootstrap))
        val held = client.acquire(role, member, SHORT)
        val t = held.token()
        println("ELECTED ${t.producerId} ${t.producerEpoch}")
        System.out.flush()
        delay(120_000)
    }
    kotlin.system.exitProcess(2)
}

// The leader-loop member process: runs Client.lead for `role` as `member`,
// printing ELECTED <producer id> <epoch> at the start of each term, whose
// work waits until the term ends; runs until killed.
fun leadChild(bootstrap: String, role: String, member: String) {
    runBlocking {
        val client = Client(mapOf("bootstrap.servers" to bootstrap))
        client.lead(role, member, SHORT) { l ->
            val t = l.token()
            println("ELECTED ${t.producerId} ${t.producerEpoch}")
            System.out.flush()
            awaitCancellation()
        }
    }
    kotlin.system.exitProcess(2)
}

// ---- Client.lead on a real Kafka ----

fun lead(bootstrap: String) = runBlocking {
    val settings = mapOf("bootstrap.servers" to bootstrap)
    val role = "uniffi-kotlin-lead-${ProcessHandle.current().pid()}-${System.currentTimeMillis()}"
    Client(settings).use { watcher ->
        check("two members alternate under lead: a hand-over, a SIGKILL, then a cancel that resigns") {
            runBlocking {
                Client(settings).use { ca ->
                    val terms = Channel<Leadership>(Channel.UNLIMITED)
                    var number = 0
                    val a = launch {
                        ca.lead(role, "a", SHORT) { l ->
                            number++
                            terms.send(l)
                            if (number == 1) {
                                // The hand-over: the work returns about a second
                                // after b registered behind a.
                                inRoster(watcher, role, "b")
                                delay(1_000)
                            } else {
                                awaitCancellation()
                            }
                        }
                    }
                    val first = withTimeout(30_000) { terms.receive() }
                    val b = MemberProcess(bootstrap, role, "b", "--lead-member")
                    try {
                        // Off this thread: a's work runs on it.
                        val tokenB = withContext(Dispatchers.IO) { b.elected(30_000) }
                        expect(compareTokens(tokenB, first.token()).toInt() == 1) { "b's $tokenB not after a's ${first.token()}" }
                        expect(watcher.describeLeadership(role).authoritative(tokenB)) { "describe after b's term began" }
                        expect(!first.isHeld() && first.ended()?.kind == ErrorKind.RESIGNED) { "a's first term: ${first.ended()}" }
                        // a contends again behind b; b is killed; a leads again.
                        inRoster(watcher, role, "a")
                        val code = b.kill()
                        expect(code == 137) { "the member process exited with $code, not by SIGKILL" }
                        val second = withTimeout(30_000) { terms.receive() }
                        expect(compareTokens(second.token(), tokenB).toInt() == 1) { "a's ${second.token()} not after b's $tokenB" }
                        expect(watcher.describeLeadership(role).authoritative(second.token())) { "describe after a's second term began" }
                        // Cancelling the caller stops the loop: the work is
                        // cancelled, the role resigned, a deregistered.
                        withTimeout(20_000) { a.cancelAndJoin() }
                        expect(!second.isHeld() && second.ended()?.kind == ErrorKind.RESIGNED) { "a's second term: ${second.ended()}" }
                        val state = watcher.describeRoleState(role)
                        expect(state.lease == null && state.roster.none { it.member == "a" }) { "after the stop: $state" }
                        println("lead: a ${first.token()} -> b $tokenB (hand-over) -> a ${second.token()} (SIGKILL of b)")
                    } finally {
                        b.kill()
                        a.cancel()
                    }
                }
            }
        }
        check("a work that throws ends lead with that error, after resigning") {
            runBlocking {
                val failing = "$role-fails"
                Client(settings).use { ca ->
                    var held: Leadership? = null
                    val e = throws<IllegalStateException> {
                        runBlocking { ca.lead(failing, "a", SHORT) { l -> held = l; throw IllegalStateException("the work failed") } }
                    }
                    expect(e.message == "the work failed") { "$e" }
                    expect(held?.ended()?.kind == ErrorKind.RESIGNED) { "the term: ${held?.ended()}" }
                    val state = watcher.describeRoleState(failing)
                    expect(state.lease == null && state.roster.isEmpty()) { "after the failure: $state" }
                }
            }
        }
        check("cancelling a lead that waits deregisters its member; no term runs") {
            runBlocking {
                val waiting = "$role-waits"
                Client(settings).use { ca ->
                    Client(settings).use { cb ->
                        val holder = ca.acquire(waiting, "a", SHORT)
                        var ran = false
                        val b = launch { cb.lead(waiting, "b", SHORT) { ran = true } }
                        inRoster(watcher, waiting, "b")
                        withTimeout(20_000) { b.cancelAndJoin() }
                        expect(!ran) { "a term ran" }
                        val state = watcher.describeRoleState(waiting)
                        expect(state.roster.map { it.member } == listOf("a")) { "roster after the cancel: ${state.roster}" }
                        holder.resign()
                        holder.close()
                    }
                }
            }
        }
    }
}

fun leadArguments() {
    check("lead refuses bad arguments before any I/O") {
        Client(mapOf("bootstrap.servers" to "127.0.0.1:1")).use { c ->
            var ran = false
            val nul = throws<KrabkaException.InvalidArgument> { runBlocking { c.lead("r", "m\u0000", SHORT) { ran = true } } }
            expect(nul.detail.contains("NUL")) { nul.detail }
            val empty = throws<KrabkaException.InvalidArgument> { runBlocking { c.lead("", "m", SHORT) { ran = true } } }
            expect(empty.detail.contains("empty")) { empty.detail }
            val timings = throws<KrabkaException.InvalidArgument> {
                runBlocking { c.lead("r", "m", AcquireOptions(leaseDuration = 1.0, renewInterval = 2.0)) { ran = true } }
            }
            expect(timings.detail.contains("must exceed the renew interval")) { timings.detail }
            expect(!ran) { "a refused loop ran its work" }
        }
    }
}

// A member process (this class's --member mode) on the same JVM, classpath
// and library path; its stdout lines are queued.
class MemberProcess(bootstrap: String, role: String, member: String, mode: String = "--member") {
    val lines = LinkedBlockingQueue<String>()
    val process: Process

    init {
        val java = ProcessHandle.current().info().command().orElse("java")
        val cmd = mutableListOf(java)
        System.getProperty("jna.library.path")?.let { cmd.add("-Djna.library.path=$it") }
        cmd.addAll(listOf("-cp", System.getProperty("java.class.path"), "krabka.coordination.test.MainKt", mode, bootstrap, role, member))
        process = ProcessBuilder(cmd).redirectErrorStream(true).start()
        Thread {
            process.inputStream.bufferedReader().forEachLine { lines.put(it) }
        }.apply { isDaemon = true }.start()
    }

    // The token the process printed once elected.
    fun elected(timeoutMs: Long): FencingToken {
        val seen = mutableListOf<String>()
        val deadline = System.currentTimeMillis() + timeoutMs
        while (true) {
            val left = deadline - System.currentTimeMillis()
            val line = lines.poll(maxOf(left, 1), TimeUnit.MILLISECONDS)
                ?: throw AssertionError("the member process printed no ELECTED within $timeoutMs ms: $seen")
            seen.add(line)
            if (line.startsWith("ELECTED ")) {
                val (id, epoch) = line.removePrefix("ELECTED ").split(" ")
                return FencingToken(id.toLong(), epoch.toShort())
            }
        }
    }

    // SIGKILL (destroyForcibly on Linux), and the exit.
    fun kill(): Int {
        process.destroyForcibly()
        return process.waitFor()
    }
}

fun show(v: RoleView) = "${v.change} leader=${v.leader?.member} lapsed=${v.lapsed?.member} roster=${v.roster.map { it.member }}"

// The next view within `ms`, naming what was awaited.
suspend fun nextView(o: Observer, what: String, ms: Long): RoleView =
    withTimeoutOrNull(ms) { o.next() ?: throw AssertionError("the observer ended while waiting for $what") }
        ?: throw AssertionError("no view within $ms ms while waiting for $what")

// Views until one of `change`: roster changes may come first, any other
// change fails (so the order is asserted).
suspend fun expectChange(o: Observer, change: Change, ms: Long): RoleView {
    val deadline = System.currentTimeMillis() + ms
    while (true) {
        val v = nextView(o, "$change", maxOf(deadline - System.currentTimeMillis(), 1))
        if (v.change == change) return v
        expect(v.change == Change.ROSTER) { "expected $change next (roster changes aside), got ${show(v)}" }
    }
}

// Views until the roster is `members` (rank order); only roster changes before.
suspend fun expectRoster(o: Observer, members: List<String>): RoleView {
    val deadline = System.currentTimeMillis() + 30_000
    while (true) {
        val v = nextView(o, "the roster $members", maxOf(deadline - System.currentTimeMillis(), 1))
        if (v.roster.map { it.member } == members) return v
        expect(v.change == Change.ROSTER) { "only roster changes before $members: ${show(v)}" }
    }
}

fun observer(bootstrap: String) = runBlocking {
    val settings = mapOf("bootstrap.servers" to bootstrap)
    val role = "uniffi-kotlin-observe-${ProcessHandle.current().pid()}-${System.currentTimeMillis()}"
    Client(settings).use { watcher ->
        check("an observer sees a hand-over and a SIGKILLed member's failover in order, with describe's tokens") {
            runBlocking {
                val o = watcher.observe(listOf(role))
                Client(settings).use { ca ->
                    Client(settings).use { cc ->
                        expect(o.roles() == listOf(role)) { "roles ${o.roles()}" }
                        val initial = nextView(o, "the initial view", 20_000)
                        expect(initial.change == Change.INITIAL && initial.role == role && initial.leader == null &&
                            initial.lapsed == null && initial.roster.isEmpty()) { show(initial) }
                        expect(initial.partition == rolePartition(role, watcher.partitions())) { "partition ${initial.partition}" }

                        // a leads, in this process.
                        val a = ca.acquire(role, "a", SHORT)
                        val electedA = expectChange(o, Change.ELECTED, 10_000)
                        expect(electedA.leader?.member == "a" && electedA.leader?.token == a.token()) { show(electedA) }
                        expect(watcher.describeLeadership(role).token() == a.token()) { "describe after a's election" }

                        // b, another process, waits behind a.
                        val b = MemberProcess(bootstrap, role, "b")
                        try {
                            val joined = expectRoster(o, listOf("a", "b"))
                            expect(joined.leader?.member == "a") { show(joined) }

                            // The hand-over: a resigns, b is elected.
                            a.resign()
                            val cleared = expectChange(o, Change.CLEARED, 10_000)
                            expect(cleared.leader == null) { show(cleared) }
                            val tokenB = b.elected(30_000)
                            val electedB = expectChange(o, Change.ELECTED, 10_000)
                            expect(electedB.leader?.member == "b" && electedB.leader?.token == tokenB) { "${show(electedB)} vs $tokenB" }
                            expect(compareTokens(tokenB, a.token()).toInt() == 1) { "$tokenB not after ${a.token()}" }
                            expect(watcher.describeLeadership(role).token() == tokenB) { "describe after b's election" }

                            // c waits behind b: its waiting event names b and b's token.
                            val events = AcquireEvents()
                            val acquiringC = async { cc.acquire(role, "c", SHORT, events) }
                            val kinds = mutableListOf<String>()
                            val waiting = withTimeout(20_000) {
                                while (true) {
                                    val e = events.next() ?: throw AssertionError("c's events ended: $kinds")
                                    kinds.add(e.kind)
                                    if (e.kind == "waiting") return@withTimeout e
                                }
                                @Suppress("UNREACHABLE_CODE")
                                throw AssertionError("unreachable")
                            }
                            expect(kinds.first() == "registered" && waiting.member == "c") { "c's events $kinds" }
                            expect(waiting.holder == "b" && waiting.token == tokenB) { "waiting: holder ${waiting.holder} token ${waiting.token} vs $tokenB" }
                            expectRoster(o, listOf("b", "c"))

                            // The crash: b is killed; its lease lapses, then c is elected.
                            val code = b.kill()
                            expect(code == 137) { "the member process exited with $code, not by SIGKILL" }
                            val lapsed = expectChange(o, Change.LAPSED, 13_000)
                            expect(lapsed.leader == null && lapsed.lapsed?.member == "b" && lapsed.lapsed?.token == tokenB) { show(lapsed) }
                            expect(lapsed.at >= lapsed.lapsed!!.deadline) { "a lapse is reported at the deadline, not before" }
                            val electedC = expectChange(o, Change.ELECTED, 20_000)
                            val c = withTimeout(20_000) { acquiringC.await() }
                            expect(electedC.leader?.member == "c" && electedC.leader?.token == c.token()) { "${show(electedC)} vs ${c.token()}" }
                            expect(compareTokens(c.token(), tokenB).toInt() == 1) { "${c.token()} not after $tokenB" }
                            val status = watcher.describeLeadership(role)
                            expect(status.token() == c.token() && status.authoritative(c.token())) { "describe after c's election" }
                            c.resign()
                            expectChange(o, Change.CLEARED, 10_000)
                            println("observer: a -> b (resign) -> c (SIGKILL of b), tokens ${a.token()} $tokenB ${c.token()}")
                            c.close()
                        } finally {
                            b.kill()
                            a.close()
                        }
                    }
                }
                o.stop()
                expect(o.isStopped() && o.next() == null) { "a stopped observer returns nothing" }
                o.close()
            }
        }
        check("observeFlow: the views as a Flow, renewals on request; cancelling the collection ends it") {
            runBlocking {
                val flowRole = "$role-flow"
                val views = Channel<RoleView>(Channel.UNLIMITED)
                val job = launch { watcher.observeFlow(flowRole).collect { views.send(it) } }
                val first = withTimeout(20_000) { views.receive() }
                expect(first.change == Change.INITIAL && first.role == flowRole) { show(first) }
                Client(settings).use { ca ->
                    val a = ca.acquire(flowRole, "a", SHORT)
                    val elected = withTimeout(10_000) {
                        var v = views.receive()
                        while (v.change == Change.ROSTER) v = views.receive()
                        v
                    }
                    expect(elected.change == Change.ELECTED && elected.leader?.token == a.token()) { show(elected) }
                    // Cancelled while it waits in next(): the collection ends promptly.
                    withTimeout(5_000) { job.cancelAndJoin() }
                    expect(job.isCancelled) { "the collection was not cancelled" }
                    val renewed = withTimeout(10_000) {
                        watcher.observeFlow(listOf(flowRole), renewals = true).first { it.change == Change.RENEWED }
                    }
                    expect(renewed.leader?.token == a.token() && renewed.leader!!.deadline > elected.leader!!.deadline) { show(renewed) }
                    a.resign()
                    a.close()
                }
            }
        }
    }
}

fun observerArguments() {
    check("observe refuses no role, an empty role and a role with a NUL, naming the problem") {
        Client(mapOf("bootstrap.servers" to "127.0.0.1:1")).use { c ->
            val none = throws<KrabkaException.InvalidArgument> { runBlocking { c.observe(listOf()) } }
            expect(none.detail.contains("at least one role")) { none.detail }
            val nul = throws<KrabkaException.InvalidArgument> { runBlocking { c.observe(listOf("ok", "a\u0000b")) } }
            expect(nul.detail.contains("NUL")) { nul.detail }
            val empty = throws<KrabkaException.InvalidArgument> { runBlocking { c.observe(listOf("")) } }
            expect(empty.detail.contains("empty")) { empty.detail }
            val flowed = throws<KrabkaException.InvalidArgument> { runBlocking { c.observeFlow(listOf()).first() } }
            expect(flowed.detail.contains("at least one role")) { flowed.detail }
        }
    }
    check("stop() wakes a waiting next() from another thread (an unreachable cluster reports nothing)") {
        Client(mapOf("bootstrap.servers" to "127.0.0.1:1")).use { c ->
            runBlocking {
                val o = c.observe(listOf("b", "a", "b"))
                expect(o.roles() == listOf("a", "b")) { "roles ${o.roles()}" }
                val pending = async { o.next() }
                delay(300)
                expect(!pending.isCompleted) { "a view from an unreachable cluster" }
                withContext(Dispatchers.IO) { o.stop() }
                expect(withTimeout(5_000) { pending.await() } == null) { "next() after stop()" }
                expect(o.isStopped()) { "stopped" }
                o.close()
            }
        }
    }
    check("an AcquireEvents serves one acquire; after a refused acquire it ends") {
        Client(mapOf("bootstrap.servers" to "127.0.0.1:1")).use { c ->
            runBlocking {
                val events = AcquireEvents()
                val e = throws<KrabkaException.InvalidArgument> {
                    runBlocking { c.acquire("r", "m", AcquireOptions(leaseDuration = -1.0), events) }
                }
                expect(e.detail.contains("lease_duration")) { e.detail }
                val again = throws<KrabkaException.InvalidArgument> { runBlocking { c.acquire("r", "m", SHORT, events) } }
                expect(again.detail.contains("already")) { again.detail }
                expect(withTimeout(5_000) { events.next() } == null) { "the events of a refused acquire" }
            }
        }
    }
}

// ---- metrics and OAuth ----

fun metricsAfterElection(bootstrap: String) = runBlocking {
    check("metrics(): an election moves krabka_elections_total of the role and member; metricsText() says the same") {
        val role = "uniffi-kotlin-metrics-${ProcessHandle.current().pid()}-${System.currentTimeMillis()}"
        fun elections() = metrics().filter { it.name == "krabka_elections_total" && it.labels == mapOf("role" to role, "member" to "m") }
        Client(mapOf("bootstrap.servers" to bootstrap)).use { client ->
            expect(elections().isEmpty()) { "a series before any election: ${elections()}" }
            runBlocking { client.acquire(role, "m", SHORT).use { it.resign() } }
            val after = elections()
            expect(after.size == 1 && after[0].kind == MetricKind.COUNTER && after[0].count == 1L && after[0].value == 1.0) { "$after" }
            val acquire = metrics().single { it.name == "krabka_acquire_seconds" && it.labels == mapOf("role" to role) }
            expect(acquire.kind == MetricKind.HISTOGRAM && acquire.count == 1L && acquire.value > 0.0) { "$acquire" }
            expect(acquire.buckets.last().le == Double.POSITIVE_INFINITY && acquire.buckets.last().count == acquire.count) { "${acquire.buckets}" }
            expect(acquire.help.isNotEmpty() && metricsText().contains("# HELP krabka_acquire_seconds ${acquire.help}\n")) { acquire.help }
            expect(acquire.buckets.isNotEmpty() && acquire.buckets.last().count <= 1L &&
                acquire.buckets.zipWithNext().all { (a, b) -> a.le < b.le && a.count <= b.count }) { "${acquire.buckets}" }
            val text = metricsText()
            expect(text.contains("krabka_elections_total{role=\"$role\",member=\"m\"} 1\n")) { text }
            expect(text.contains("# TYPE krabka_acquire_seconds histogram\n")) { text }
        }
    }
}

/** An OAuthTokenProvider that counts its calls and answers with [answer]. */
class Provider(val answer: () -> OAuthToken) : OAuthTokenProvider {
    val calls = java.util.concurrent.atomic.AtomicInteger()
    override fun token(): OAuthToken {
        calls.incrementAndGet()
        return answer()
    }
}

fun oauth(bootstrap: String) {
    // OAUTHBEARER over the one-node cluster's plaintext listener: a topic
    // check asks the provider for a token before it connects, so what the
    // provider returns or throws decides the outcome; a token it accepts
    // would then meet a broker that speaks no SASL. (A whole round with
    // tokens needs the secured cluster: bindings/python/tests/test_secured.py.)
    val sasl = mapOf("bootstrap.servers" to bootstrap, "security.protocol" to "SASL_PLAINTEXT", "sasl.mechanism" to "OAUTHBEARER")
    check("OAUTHBEARER without a token provider is refused; with one, its token is taken before the SASL handshake") {
        val e = throws<KrabkaException.InvalidArgument> { Client(sasl) }
        expect(e.detail.contains("token provider")) { e.detail }
        val p = Provider { OAuthToken("t", System.currentTimeMillis() + 3_600_000, "admin") }
        Client(sasl, ClientOptions(oauthTokenProvider = p, connectTimeout = 5.0)).use { c ->
            // The token is taken (one call), then the plaintext broker refuses SASL.
            val e = throws<KrabkaException> { runBlocking { c.checkStateTopic() } }
            expect(p.calls.get() == 1 && e.toString().contains("SaslHandshake")) { "calls ${p.calls.get()}: $e" }
        }
    }
    check("an exception of the token provider reaches the operation: Transient with its message, Fatal when it threw Fatal") {
        val broken = Provider { throw java.io.IOException("the identity provider is unreachable") }
        Client(sasl, ClientOptions(oauthTokenProvider = broken, connectTimeout = 5.0)).use { c ->
            val started = System.nanoTime()
            val e = throws<KrabkaException.Transient> { runBlocking { c.checkStateTopic() } }
            expect(e.detail.contains("token provider") && e.detail.contains("the identity provider is unreachable")) { e.detail }
            expect(System.nanoTime() - started < 5_000_000_000) { "not at once: ${(System.nanoTime() - started) / 1_000_000} ms" }
            expect(broken.calls.get() >= 1) { "calls ${broken.calls.get()}" }
        }
        val revoked = Provider { throw KrabkaException.Fatal("the client credentials were revoked") }
        Client(sasl, ClientOptions(oauthTokenProvider = revoked, connectTimeout = 5.0)).use { c ->
            val e = throws<KrabkaException.Fatal> { runBlocking { c.checkStateTopic() } }
            expect(e.detail.contains("token provider") && e.detail.contains("revoked")) { e.detail }
        }
    }
    check("a token the core refuses (expired; lifetimeMs not a time) is InvalidArgument naming it") {
        val expired = Provider { OAuthToken("t", System.currentTimeMillis() - 1_000) }
        Client(sasl, ClientOptions(oauthTokenProvider = expired, connectTimeout = 5.0)).use { c ->
            val e = throws<KrabkaException.InvalidArgument> { runBlocking { c.checkStateTopic() } }
            expect(e.detail.contains("expired")) { e.detail }
        }
        val zero = Provider { OAuthToken("t", 0) }
        Client(sasl, ClientOptions(oauthTokenProvider = zero, connectTimeout = 5.0)).use { c ->
            val e = throws<KrabkaException.InvalidArgument> { runBlocking { c.checkStateTopic() } }
            expect(e.detail.contains("lifetime_ms")) { e.detail }
        }
    }
}

// ---- Kotlin idioms: sealed events, Flows, java.time ----

fun idioms(bootstrap: String) = runBlocking {
    val role = "uniffi-kotlin-idioms-${ProcessHandle.current().pid()}-${System.currentTimeMillis()}"
    val timings = AcquireOptions.of(java.time.Duration.ofSeconds(3), java.time.Duration.ofSeconds(1), java.time.Duration.ofMillis(500))
    check("AcquireOptions.of and ClientOptions.of take java.time.Duration; refusals are the core's") {
        expect(timings == AcquireOptions(3.0, 1.0, 0.5)) { "$timings" }
        expect(ClientOptions.of(connectTimeout = java.time.Duration.ofMillis(2500)).connectTimeout == 2.5) { "connect timeout" }
        Client(mapOf("bootstrap.servers" to "127.0.0.1:1")).use { c ->
            val e = throws<KrabkaException.InvalidArgument> {
                runBlocking { c.acquire("r", "m", AcquireOptions.of(leaseDuration = java.time.Duration.ofSeconds(-1))) }
            }
            expect(e.detail == "lease_duration must be a positive number of seconds, got -1") { e.detail }
        }
    }
    check("the events as sealed classes: an acquire's Flow from Registered to Elected, a standby Waiting behind the holder, the term's Flow ending Resigned, Deregistered") {
        // One client per member: a client acquires a role once at a time.
        Client(mapOf("bootstrap.servers" to bootstrap)).use { client -> Client(mapOf("bootstrap.servers" to bootstrap)).use { other ->
            runBlocking {
                val aEvents = AcquireEvents()
                val aSeen = async { aEvents.asFlow().toList() }
                val a = client.acquire(role, "a", timings, aEvents)
                expect(a.leaseRemaining() > java.time.Duration.ZERO && a.leaseRemaining() <= java.time.Duration.ofSeconds(3)) { "${a.leaseRemaining()}" }
                expect(a.lease().deadlineInstant.isAfter(a.lease().grantedAtInstant)) { "${a.lease()}" }
                val aTerm = async { a.eventFlow().toList() }
                val bEvents = AcquireEvents()
                val waiting = CompletableDeferred<krabka.coordination.events.LeadershipEvent.Waiting>()
                val bSeen = async {
                    bEvents.asFlow().onEach { if (it is krabka.coordination.events.LeadershipEvent.Waiting && it.holder != null) waiting.complete(it) }.toList()
                }
                val bAcquire = async { other.acquire(role, "b", timings, bEvents) }
                val w = withTimeout(20_000) { waiting.await() }
                expect(w.holder == "a" && w.holderToken == a.token() && w.role == role && w.member == "b") { "$w" }
                expect(!w.challengeAt.isBefore(w.at.minusSeconds(60))) { "$w" }
                a.resign()
                val b = withTimeout(20_000) { bAcquire.await() }
                val term = withTimeout(10_000) { aTerm.await() }
                val resigned = term.filterIsInstance<krabka.coordination.events.LeadershipEvent.Resigned>().singleOrNull()
                expect(resigned?.cleared == true && term.last() is krabka.coordination.events.LeadershipEvent.Deregistered) { "a's term: $term" }
                val acquired = withTimeout(10_000) { aSeen.await() }
                expect(acquired.first() is krabka.coordination.events.LeadershipEvent.Registered) { "a's events: $acquired" }
                val elected = acquired.filterIsInstance<krabka.coordination.events.LeadershipEvent.Elected>().firstOrNull()
                    ?: throw AssertionError("no Elected: $acquired")
                expect(elected.token == a.token() && elected.deadline.isAfter(elected.grantedAt)) { "$elected" }
                b.resign()
                val bAll = withTimeout(10_000) { bSeen.await() }
                expect(bAll.any { it is krabka.coordination.events.LeadershipEvent.Elected } && bAll.any { it is krabka.coordination.events.LeadershipEvent.Resigned }) { "b's events: $bAll" }
                a.close(); b.close()
            }
        } }
    }
    check("a kind newer than the binding is Unknown with its name") {
        val r = EventRecord("brand_new", "r", "m", 1_000L, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null)
        val e = r.toEvent()
        expect(e is krabka.coordination.events.LeadershipEvent.Unknown && e.kind == "brand_new" && e.at == java.time.Instant.ofEpochMilli(1_000)) { "$e" }
        val partial = EventRecord("elected", "r", "m", 0L, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null)
        expect(partial.toEvent() is krabka.coordination.events.LeadershipEvent.Unknown) { "an elected without a token: ${partial.toEvent()}" }
    }
    check("write_resolved carries committed") {
        fun resolved(committed: Boolean?) = EventRecord("write_resolved", "r", "m", 0L, null, null, null, null, null, null, null, null, null, null, null, null, null, null, committed)
        val yes = resolved(true).toEvent()
        expect(yes is krabka.coordination.events.LeadershipEvent.WriteResolved && yes.committed) { "$yes" }
        val no = resolved(false).toEvent()
        expect(no is krabka.coordination.events.LeadershipEvent.WriteResolved && !no.committed) { "$no" }
        expect(resolved(null).toEvent() is krabka.coordination.events.LeadershipEvent.Unknown) { "a write_resolved without committed: ${resolved(null).toEvent()}" }
    }
}

// ---- logs ----

/** A Logger that keeps each record with the thread it came on. */
class Collect : Logger {
    val records = java.util.Collections.synchronizedList(ArrayList<Pair<LogRecord, String>>())
    override fun log(record: LogRecord) {
        // The native name of the calling thread (Linux).
        records.add(record to File("/proc/thread-self/comm").readText().trim())
    }
    fun snapshot(): List<Pair<LogRecord, String>> = synchronized(records) { records.toList() }
    fun matching(messages: Collection<String>) = snapshot().filter { it.first.message in messages }
    /** Waits (at most [ms]) until [n] records with one of [messages] arrived. */
    fun await(messages: Collection<String>, n: Int, ms: Long = 20_000): List<Pair<LogRecord, String>> {
        val deadline = System.nanoTime() + ms * 1_000_000
        while (true) {
            val got = matching(messages)
            if (got.size >= n) return got
            if (System.nanoTime() > deadline) throw AssertionError("$n records of $messages; got ${snapshot().map { it.first.text }}")
            Thread.sleep(10)
        }
    }
}

fun logs(bootstrap: String) = runBlocking {
    Client(mapOf("bootstrap.servers" to bootstrap)).use { client ->
        // The one-node cluster's state topic has min.insync.replicas=1: every
        // check of the topic warns about it (and reports the same text).
        var warnings = listOf<String>()
        check("a warning of the core reaches the logger with its level and target, on the krabka-log thread") {
            val c = Collect()
            setLogger(c, LogLevel.WARN)
            warnings = runBlocking { client.checkStateTopic() }.warnings
            expect(warnings.any { it.contains("min.insync.replicas") }) { "report warnings $warnings" }
            val (r, thread) = c.await(warnings, warnings.size).first()
            expect(r.level == LogLevel.WARN) { "level ${r.level}" }
            expect(r.target == "krabka_coordination::transport::kafka::topic") { "target ${r.target}" }
            expect(r.text == r.message && r.file?.endsWith("topic.rs") == true && (r.line ?: 0) > 0) { "$r" }
            // JNA attaches the library's thread to the JVM under a name of
            // its own (Thread-N); the native name is the library's.
            expect(thread == "krabka-log") { "delivered on the native thread $thread" }
        }
        check("INFO records carry the member's context; nothing below the logger's level arrives") {
            val role = "uniffi-kotlin-logs-${ProcessHandle.current().pid()}-${System.currentTimeMillis()}"
            val verbose = Collect()
            setLogger(verbose, LogLevel.INFO)
            runBlocking {
                client.acquire(role, "log-a", SHORT).use { it.resign() }
                client.checkStateTopic()
            }
            // In order: once the check's warnings are in, so is everything before.
            verbose.await(warnings, warnings.size)
            val elected = verbose.snapshot().map { it.first }.firstOrNull { it.message == "elected" }
                ?: throw AssertionError("no elected record at INFO: ${verbose.snapshot().map { it.first.text }}")
            expect(elected.level == LogLevel.INFO) { "level ${elected.level}" }
            val context = elected.context.associate { it.name to it.value }
            expect(context["role"] == role && context["member"] == "log-a") { "context ${elected.context}" }
            expect(elected.fields.any { it.name == "token" } && elected.text.startsWith("role=$role member=log-a")) { elected.text }
            val c = Collect()
            setLogger(c, LogLevel.WARN)
            runBlocking {
                client.acquire(role, "log-b", SHORT).use { it.resign() }
                client.checkStateTopic()
            }
            c.await(warnings, warnings.size)
            val wrong = c.snapshot().filter { it.first.level != LogLevel.WARN && it.first.level != LogLevel.ERROR }
            expect(wrong.isEmpty()) { "below WARN: ${wrong.map { "${it.first.level} ${it.first.text}" }}" }
        }
        check("setLogger(null) stops the delivery; the next logger gets only what came after it") {
            val before = Collect()
            setLogger(before, LogLevel.WARN)
            runBlocking { client.checkStateTopic() }
            before.await(warnings, warnings.size)
            setLogger(null)
            runBlocking { client.checkStateTopic() }   // not forwarded
            val after = Collect()
            setLogger(after)   // WARN by default
            runBlocking { client.checkStateTopic() }
            after.await(warnings, warnings.size)
            expect(before.matching(warnings).size == warnings.size) { "the first logger got ${before.matching(warnings).size}" }
            expect(after.matching(warnings).size == warnings.size) { "the second logger got ${after.matching(warnings).size}" }
        }
        check("a logger that throws loses that record only: the next records are delivered") {
            val thrown = java.util.concurrent.atomic.AtomicInteger()
            setLogger(object : Logger {
                override fun log(record: LogRecord) {
                    if (record.message in warnings) thrown.incrementAndGet()
                    throw IllegalStateException("a broken logger")
                }
            })
            runBlocking { client.checkStateTopic() }
            val deadline = System.nanoTime() + 20_000_000_000
            while (thrown.get() < warnings.size && System.nanoTime() < deadline) Thread.sleep(10)
            expect(thrown.get() == warnings.size) { "the throwing logger was called ${thrown.get()} times" }
            val c = Collect()
            setLogger(c)
            runBlocking { client.checkStateTopic() }
            c.await(warnings, warnings.size)
        }
        setLogger(null)
    }
}

fun main(args: Array<String>) {
    if (args.firstOrNull() == "--member") return memberChild(args[1], args[2], args[3])
    if (args.firstOrNull() == "--lead-member") return leadChild(args[1], args[2], args[3])
    // Modes of ci/release-cross-check.sh, which runs the jar's arm64 library
    // on an arm64 JVM under qemu-user: --offline, the golden vectors and the
    // argument checks only (no Kafka); --in-process, those and the tests on
    // Kafka that start no second JVM (qemu-user runs no child of the target's
    // architecture). Without a mode every test runs, and a missing Kafka is
    // a failure.
    val mode = args.firstOrNull()?.takeIf { it == "--offline" || it == "--in-process" }
    val golden = File((if (mode != null) args.drop(1) else args.toList()).getOrElse(0) { "golden" })
    golden(golden)
    arguments()
    observerArguments()
    leadArguments()
    val bootstrap = System.getenv("KRABKA_BOOTSTRAP")
    val topic = System.getenv("KRABKA_UNIFFI_TOPIC") ?: "krabka-uniffi-results"
    if (mode == "--offline") {
        println("--offline: the leadership tests on Kafka were not run")
    } else if (bootstrap.isNullOrEmpty()) {
        println("KRABKA_BOOTSTRAP is not set: the leadership tests need a Kafka")
        failed++
    } else {
        kafka(bootstrap, topic)
        logs(bootstrap)
        metricsAfterElection(bootstrap)
        oauth(bootstrap)
        idioms(bootstrap)
        fenced(bootstrap, topic)
        offsets(bootstrap, topic, System.getenv("KRABKA_UNIFFI_INPUT") ?: "krabka-uniffi-input")
        cancelledNext(bootstrap)
        if (mode == "--in-process") {
            println("--in-process: the tests with a second member process (lead, observer) were not run")
        } else {
            lead(bootstrap)
            observer(bootstrap)
        }
    }
    println("$passed passed, $failed failed")
    kotlin.system.exitProcess(if (failed == 0) 0 else 1)
}
