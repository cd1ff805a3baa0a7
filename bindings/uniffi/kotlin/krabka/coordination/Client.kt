// Hand-written Kotlin shipped with the generated bindings (package
// krabka.coordination): the client callers construct, over the generated
// ClientBase (uniffi.toml renames it), so that close() ends what the client
// started. uniffi's own close() only frees the object, and only once every
// call in flight returned: it could not stop a pending acquire, and the
// garbage collector's cleanup must never resign a role. The closed client
// keeps no Kafka client and no task; its few bytes are freed by the garbage
// collector's cleaner, so that a later call throws the binding's closed
// error rather than uniffi's "already destroyed".
package krabka.coordination

/**
 * The core client of one set of librdkafka settings (the constructor's
 * `kafka`: `bootstrap.servers` at least) and its `options`; every
 * operation is [ClientBase]'s. Nothing connects yet.
 *
 * [close] (and leaving `use { }`, or Java's try-with-resources) closes it:
 * it resigns every leadership the client holds (all at once, each bounded
 * by its lease), cancels its pending acquires (they throw
 * [KrabkaException.Cancelled]), stops its leader loops and observers and
 * lets go of its Kafka clients. Every later operation throws
 * [KrabkaException.InvalidArgument] ("the client is closed"). A client
 * merely dropped and garbage-collected resigns nothing: its leaderships
 * are released by their own `close()` or expire with their leases.
 *
 * @throws KrabkaException.InvalidArgument from the constructor for a
 *   setting or option the core refuses, naming it.
 */
open class Client : ClientBase {
    @JvmOverloads
    constructor(kafka: Map<String, String>, options: ClientOptions? = null) : super(kafka, options)

    /**
     * The client behind [handle], a reference the library handed out (a
     * test process's client, `TestProcess.client`): this object owns it.
     */
    internal constructor(withHandle: UniffiWithHandle, handle: Long) : super(withHandle, handle)

    /**
     * Closes the client (see the class documentation), blocking the calling
     * thread until its leaderships are resigned (each at most its lease);
     * on a thread of the binding's runtime (a coroutine it resumed) it
     * starts the close and returns, as blocking there would stall it.
     * Idempotent; never throws. From a coroutine, the suspend
     * `closeClient()` does the same without blocking a thread.
     */
    override fun close() = destroy()

    /**
     * What [close] does: uniffi's `use { }` and generated code call
     * `destroy()`, so it closes the client too. The object itself is freed
     * by the garbage collector's cleaner, never by this call: a later call
     * throws the binding's closed error, not uniffi's "already destroyed".
     */
    override fun destroy() {
        closeBlocking()
    }
}
