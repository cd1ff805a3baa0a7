// Hand-written Kotlin shipped with the generated bindings (package
// krabka.coordination): the leader loop as a suspend function over the
// generated LeaderLoop and Term. Every rule is the core's: when to resign,
// how long to back off, when to contend again.
package krabka.coordination

import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.async
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.isActive
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext

/** Why a term's work was cancelled: the term ended (fenced, lease expired,
 * resigned) or the loop was stopped. */
class TermEndedException(message: String) : CancellationException(message)

/**
 * The leader loop: contends for [role] as [member] and runs [work] for each
 * term it wins, contending again after each, until the calling coroutine is
 * cancelled (the loop then stops: a waiting acquire deregisters, a running
 * work is cancelled and the role resigned, and the cancellation is
 * rethrown).
 *
 * When [work] returns, the role is resigned (an immediate hand-over) and the
 * member contends again after its backoff. When the term ends under it
 * (fenced, lease expired), its coroutine is cancelled with a
 * [TermEndedException] and, once it returns, the member contends again.
 * When [work] throws, the role is resigned and `lead` throws that error.
 * The role, the member and the timings are checked before any I/O
 * ([KrabkaException.InvalidArgument]).
 */
suspend fun Client.lead(
    role: String,
    member: String,
    options: AcquireOptions? = null,
    work: suspend (Leadership) -> Unit,
) = leadTerms(role, member, options) { leadership, _ -> work(leadership) }

/** [lead], the work also given the [Term] (its number and end), open while the work runs. */
internal suspend fun Client.leadTerms(
    role: String,
    member: String,
    options: AcquireOptions?,
    work: suspend (Leadership, Term) -> Unit,
) {
    val loop = leaderLoop(role, member, options)
    try {
        while (true) {
            val term = loop.nextTerm() ?: return
            val leadership = term.leadership()
            var failure: Throwable? = null
            try {
                coroutineScope {
                    val working = async { work(leadership, term) }
                    val watching = launch {
                        term.ended()
                        working.cancel(TermEndedException("the term ended: ${leadership.ended()?.kind ?: "the loop was stopped"}"))
                    }
                    try {
                        working.await()
                    } catch (e: CancellationException) {
                        // The term ended under the work: contend again. The
                        // caller's own cancellation goes on up.
                        if (!currentCoroutineContext().isActive) throw e
                    } finally {
                        watching.cancel()
                    }
                }
            } catch (e: CancellationException) {
                throw e
            } catch (e: Throwable) {
                failure = e
            } finally {
                withContext(NonCancellable) {
                    // The leadership is left to the caller (it may inspect it
                    // after the term: it is resigned by now).
                    loop.finish(term)
                    term.close()
                }
            }
            if (failure != null) throw failure
        }
    } finally {
        withContext(NonCancellable) {
            loop.stop()
            // Waits for an acquire the caller stopped waiting for: it
            // deregisters (or finishes a term won in that instant) before
            // this returns; then nothing is left to wait for.
            loop.nextTerm()?.let { loop.finish(it) }
            loop.close()
        }
    }
}
