// Hand-written Kotlin shipped with the generated bindings (package
// krabka.coordination): the fencing token's class. uniffi.toml maps the
// library's token (carried over the FFI as FencingTokenParts) to this class,
// so the generated code needs this file. Order, text and parsing are the
// core's (compareTokens, tokenText, parseToken); nothing is re-implemented.
package krabka.coordination

/**
 * A fencing token: the producer id and producer epoch Kafka's transaction
 * coordinator minted for a role. A value: equal when both fields are.
 *
 * Tokens order by producer id first, then epoch (the core's order, never the
 * epoch alone); [NO_EPOCH] ranks below every minted token. [toString] is the
 * token's wire form, `PRODUCER_ID/EPOCH` (`"4001/7"`) or `"NoEpoch"`, the
 * same text in every binding, the CLI and `KRABKA_TOKEN`; [parse] reads it.
 */
class FencingToken(
    /** The producer id the coordinator assigned to the role. */
    val producerId: Long,
    /** The producer epoch within that producer id. */
    val producerEpoch: Short,
) : Comparable<FencingToken> {
    /** -1, 0 or 1 as this token is older than, the same as, or newer than [other] (the core's order). */
    override fun compareTo(other: FencingToken): Int = compareTokens(this, other).toInt()

    /** The wire form: `PRODUCER_ID/EPOCH` in decimal, or `NoEpoch`. */
    override fun toString(): String = tokenText(this)

    override fun equals(other: Any?): Boolean =
        other is FencingToken && other.producerId == producerId && other.producerEpoch == producerEpoch

    override fun hashCode(): Int = 31 * producerId.hashCode() + producerEpoch

    /** The producer id, for `val (producerId, producerEpoch) = token`. */
    operator fun component1(): Long = producerId

    /** The producer epoch, for destructuring. */
    operator fun component2(): Short = producerEpoch

    /** A copy with the fields given replaced. */
    fun copy(producerId: Long = this.producerId, producerEpoch: Short = this.producerEpoch) =
        FencingToken(producerId, producerEpoch)

    companion object {
        /**
         * The token of its wire form [text] (`"4001/7"`, `"NoEpoch"`), read by
         * the core's parser as in every binding (Java: `FencingToken.parse(text)`).
         * Malformed text throws [KrabkaException.InvalidArgument], its detail
         * quoting the text and naming the expected form.
         */
        @JvmStatic
        @Throws(KrabkaException::class)
        fun parse(text: String): FencingToken = parseToken(text)

        /** The token of no term (producer id -1, epoch -1), what a role nobody has taken reports. */
        @JvmField
        val NO_EPOCH: FencingToken = noEpoch()
    }
}

/**
 * True when the token of wire form [token] (`"4001/7"`) is the role's
 * current token; malformed text throws [KrabkaException.InvalidArgument].
 */
@Throws(KrabkaException::class)
fun LeadershipStatus.authoritative(token: String): Boolean = authoritative(FencingToken.parse(token))
