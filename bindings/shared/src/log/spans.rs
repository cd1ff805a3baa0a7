//! The spans of [`super::ForwardSubscriber`]: what each open span recorded
//! and which span it is in, in a table made per process, and the spans each
//! thread is in, in a thread-local array.
//!
//! Nothing here is shared across a `fork()` in a state the child cannot
//! use: the table is a [`PerProcess`] value (a forked child makes an empty
//! one, so a lock some thread of the parent held at the fork is not the
//! child's), and the thread-local array is plain `Copy` data, which needs
//! no destructor and so registers nothing when a thread first uses it. The
//! child's spans are its own; the parent's are unknown to it, and an event
//! inside one of them simply has less context.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use tracing::Metadata;

use super::PerProcess;

/// An open span.
struct Span {
    metadata: &'static Metadata<'static>,
    /// The span it was opened in, kept open while this one is.
    parent: Option<u64>,
    /// Its fields, in the order recorded.
    fields: Vec<(String, String)>,
    /// The handles on it (`clone_span` adds one, `try_close` takes one).
    refs: usize,
}

type Table = Mutex<HashMap<u64, Span>>;

/// The open spans of this process.
static TABLE: PerProcess<Table> = PerProcess::new();

/// The next span id (ids are never 0, and never reused).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// How deep the entered spans of one thread are tracked; deeper ones are
/// counted but not recorded (the core nests two or three).
const DEPTH: usize = 32;

thread_local! {
    /// The spans this thread is in, innermost last (the first `ENTERED`).
    static STACK: Cell<[u64; DEPTH]> = const { Cell::new([0; DEPTH]) };
    /// How many spans this thread has entered and not exited.
    static ENTERED: Cell<usize> = const { Cell::new(0) };
}

fn table() -> MutexGuard<'static, HashMap<u64, Span>> {
    let table = match TABLE.get_or_try_init(|| Ok::<_, std::convert::Infallible>(Table::default()))
    {
        Ok(t) => t,
        Err(never) => match never {},
    };
    table.lock().unwrap_or_else(|e| e.into_inner())
}

/// Opens a span in `parent` and returns its id.
pub(super) fn open(
    metadata: &'static Metadata<'static>,
    parent: Option<u64>,
    fields: Vec<(String, String)>,
) -> u64 {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let mut t = table();
    // A parent unknown here (closed, or the parent process's) is none.
    let parent = parent.filter(|p| match t.get_mut(p) {
        Some(p) => {
            p.refs += 1;
            true
        }
        None => false,
    });
    t.insert(
        id,
        Span {
            metadata,
            parent,
            fields,
            refs: 1,
        },
    );
    id
}

/// Runs `f` on the fields of span `id`, if it is open.
pub(super) fn with_fields(id: u64, f: impl FnOnce(&mut Vec<(String, String)>)) {
    if let Some(span) = table().get_mut(&id) {
        f(&mut span.fields);
    }
}

/// The metadata of span `id`, if it is open.
pub(super) fn metadata(id: u64) -> Option<&'static Metadata<'static>> {
    table().get(&id).map(|s| s.metadata)
}

/// The fields of span `id` and of the spans it is in, outermost first.
pub(super) fn context(id: u64) -> Vec<(String, String)> {
    let t = table();
    let mut chain = Vec::new();
    let mut next = Some(id);
    while let Some(span) = next.and_then(|id| t.get(&id)) {
        chain.push(&span.fields);
        next = span.parent;
    }
    chain.into_iter().rev().flatten().cloned().collect()
}

/// One more handle on span `id`.
pub(super) fn clone(id: u64) {
    if let Some(span) = table().get_mut(&id) {
        span.refs += 1;
    }
}

/// Drops a handle on span `id`; true when that closed it. A closed span
/// drops its hold on its parent, which may close that one too.
pub(super) fn close(id: u64) -> bool {
    let mut t = table();
    let Some(parent) = release(&mut t, id) else {
        return false;
    };
    let mut next = parent;
    while let Some(id) = next {
        next = release(&mut t, id).flatten();
    }
    true
}

/// Drops a handle on span `id` in `t`: `Some(its parent)` when that closed
/// it, `None` when it stays open (or was not open).
fn release(t: &mut HashMap<u64, Span>, id: u64) -> Option<Option<u64>> {
    let span = t.get_mut(&id)?;
    span.refs = span.refs.saturating_sub(1);
    if span.refs > 0 {
        return None;
    }
    t.remove(&id).map(|s| s.parent)
}

/// Enters span `id` on this thread.
pub(super) fn enter(id: u64) {
    let n = ENTERED.get();
    if n < DEPTH {
        let mut stack = STACK.get();
        stack[n] = id;
        STACK.set(stack);
    }
    ENTERED.set(n + 1);
}

/// Exits span `id` on this thread (the innermost one it entered, as
/// `tracing` exits them; otherwise the innermost entry of `id`).
pub(super) fn exit(id: u64) {
    let n = ENTERED.get();
    if n == 0 {
        return;
    }
    if n > DEPTH {
        // Deeper than recorded: the span left is one not recorded.
        ENTERED.set(n - 1);
        return;
    }
    let mut stack = STACK.get();
    if let Some(i) = stack[..n].iter().rposition(|s| *s == id) {
        stack.copy_within(i + 1..n, i);
        stack[n - 1] = 0;
        STACK.set(stack);
        ENTERED.set(n - 1);
    }
}

/// The innermost span this thread is in.
pub(super) fn current() -> Option<u64> {
    let n = ENTERED.get().min(DEPTH);
    (n > 0).then(|| STACK.get()[n - 1])
}
