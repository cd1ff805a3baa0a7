"""Fenced writes to SQL stores: a leader's database transaction commits only
if no newer fencing token of its role reached the store first.

The protocol is ``docs/fenced-stores.md``: one row per role in the table
``krabka_fence`` holds the newest token a transaction carried through the
fence; :func:`fence`, called inside the caller's own transaction, checks the
offered token against it and advances it, so the check and the caller's
writes commit or roll back together. The SQL and every decision come from
the Rust crate ``krabka-coordination-stores`` (through the native module):
this module only runs its statements through the caller's driver.

Drivers: psycopg 3 (``pip install krabka-coordination[postgres]``; sync
:func:`fence` and asyncio :func:`fence_async`), the standard ``sqlite3``,
and any other DB-API 2 connection to PostgreSQL or SQLite (``store=``
names the dialect when the driver is not one of these). No driver is
imported by this module::

    import psycopg
    from krabka_coordination import stores

    with psycopg.connect(url) as db:
        stores.migrate(db)                      # once: the table (and function)
        with db.transaction():
            stores.fence(db, "billing", lead.token,
                         lambda: client.describe_leadership("billing"))
            db.execute("INSERT INTO invoices (id) VALUES (42)")

A refusal is :class:`~krabka_coordination.Fenced` naming the role, the
stored token and the offered one: roll back and stop writing as that
leader. :class:`~krabka_coordination.TransientError` (a serialization
failure under REPEATABLE READ or SERIALIZABLE, a deadlock, a busy SQLite
database, a lost connection): roll back and retry the whole transaction a
bounded number of times. :class:`~krabka_coordination.FatalError`: another
database error (a missing table: run :func:`migrate`), the driver's
exception as its ``__cause__``.
"""

from __future__ import annotations

import inspect
import re
import sqlite3
import sys
from typing import Any, Awaitable, Callable, Generator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._native import FencingToken, InvalidArgumentError, LeadershipStatus

__all__ = ["Describe", "fence", "fence_async", "migrate", "migrate_async"]

Describe = Callable[[], Union[LeadershipStatus, Awaitable[LeadershipStatus]]]
"""Asks the role's transaction coordinator for its current token, e.g.
``lambda: client.describe_leadership(role)`` (or the ``AsyncClient``'s
coroutine for :func:`fence_async`). Called only after a producer id
rotation, while the fence row is locked."""

_STORE_NAMES = {"postgres": "PostgreSQL", "sqlite": "SQLite"}
_PLACEHOLDER = re.compile(r"[$?](\d+)")

# One step of the protocol for the driver loop: a statement and its
# arguments (the loop sends back the first row, or None), or a request to
# describe (the loop sends back the current token).
_Step = Union[Tuple[str, str, Sequence[Any]], Tuple[str]]
_Protocol = Generator[_Step, Any, None]


def migrate(conn: Any, *, store: Optional[str] = None) -> None:
    """Creates the fence table (and, on PostgreSQL, the ``krabka_fence`` SQL
    function) if missing, and commits (on sqlite3 the migration's script
    commits by itself). Run it once per database before the first fenced
    write; running it again changes nothing. Raises
    :class:`~krabka_coordination.FatalError` (or ``TransientError``) for a
    database error."""
    store = _store_of(conn, store)
    migration = _native._fence_sql(store)[0]
    try:
        if isinstance(conn, sqlite3.Connection):
            conn.executescript(migration)
        else:
            cur = conn.cursor()
            try:
                cur.execute(migration)
            finally:
                cur.close()
            conn.commit()
    except Exception as e:
        raise _db_error(conn, store, "migrate", "(all roles)", e)  # its __cause__ is e


async def migrate_async(conn: Any) -> None:
    """:func:`migrate` on an asyncio connection to PostgreSQL (psycopg's
    ``AsyncConnection``)."""
    migration = _native._fence_sql("postgres")[0]
    try:
        async with conn.cursor() as cur:
            await cur.execute(migration)
        await conn.commit()
    except Exception as e:
        raise _db_error(conn, "postgres", "migrate", "(all roles)", e)  # its __cause__ is e


def fence(
    conn: Any,
    role: str,
    token: FencingToken,
    describe: Callable[[], LeadershipStatus],
    *,
    store: Optional[str] = None,
) -> None:
    """Checks ``token`` against the newest token of ``role`` that the store
    accepted, and advances it, inside the transaction open on ``conn``.

    On return the token may write: the role's fence row holds it and stays
    locked (PostgreSQL) or the database's write lock is held (SQLite) until
    the transaction ends, so no transaction with another token of the role
    commits in between, and the transaction commits its writes with the
    advance or rolls both back. Call it inside the transaction, before its
    guarded writes (at least before its commit), and commit yourself. On
    SQLite begin the transaction ``IMMEDIATE`` (or make this its first
    statement; ``sqlite3`` opens one implicitly before it).

    ``describe`` is called only when the stored token has another producer
    id than ``token`` (a rotation), and then while the row is locked; pass
    ``lambda: client.describe_leadership(role)``.

    ``store`` is ``"postgres"`` or ``"sqlite"``, needed only for a driver
    other than psycopg, psycopg2 and ``sqlite3``.

    Raises :class:`~krabka_coordination.Fenced` (a newer token reached the
    store, or the rotation is not current), naming the role and the tokens;
    ``InvalidArgumentError`` for an invalid role or an unminted token;
    ``TransientError`` / ``FatalError`` for a database error (see the module
    documentation), and whatever ``describe`` raises. After any error, roll
    the transaction back.
    """
    store = _store_of(conn, store)
    style = _paramstyle(conn)
    steps = _protocol(store, role, token)
    cur = conn.cursor()
    try:
        reply: Any = None
        while True:
            try:
                step = steps.send(reply)
            except StopIteration:
                return
            if step[0] == "describe":
                reply = describe().token
                continue
            what, sql, args = step  # type: ignore[misc]
            query, params = _bind(sql, args, style)
            try:
                cur.execute(query, params)
                reply = cur.fetchone() if cur.description is not None else None
            except Exception as e:
                raise _db_error(conn, store, what, role, e)  # its __cause__ is e
    finally:
        cur.close()


async def fence_async(
    conn: Any,
    role: str,
    token: FencingToken,
    describe: Describe,
) -> None:
    """:func:`fence` on an asyncio connection to PostgreSQL (psycopg's
    ``AsyncConnection``), in its open transaction. ``describe`` may return
    the status or an awaitable of it (``lambda:
    async_client.describe_leadership(role)``). Raises as :func:`fence`."""
    steps = _protocol("postgres", role, token)
    style = _paramstyle(conn)
    async with conn.cursor() as cur:
        reply: Any = None
        while True:
            try:
                step = steps.send(reply)
            except StopIteration:
                return
            if step[0] == "describe":
                status = describe()
                if inspect.isawaitable(status):
                    status = await status
                reply = status.token
                continue
            what, sql, args = step  # type: ignore[misc]
            query, params = _bind(sql, args, style)
            try:
                await cur.execute(query, params)
                reply = await cur.fetchone() if cur.description is not None else None
            except Exception as e:
                raise _db_error(conn, "postgres", what, role, e)  # its __cause__ is e


def _protocol(store: str, role: str, token: FencingToken) -> _Protocol:
    """The fence's steps (``docs/fenced-stores.md``) for one offered token;
    every decision is the Rust rule's (``_native._fence_*``)."""
    _native._fence_check(role, token)
    _, advance, read, rotate = _native._fence_sql(store)
    args = (role, token.producer_id, token.producer_epoch)
    if (yield ("fence", advance, args)) is not None:
        return
    row = yield ("fence (read)", read, (role,))
    # A driver may give rows as mappings (a dict row factory): in column order.
    producer_id, epoch = list(row.values()) if isinstance(row, Mapping) else list(row)
    stored = FencingToken(int(producer_id), int(epoch))
    _native._fence_verdict(role, stored, token)  # raises Fenced when older
    current = yield ("describe",)
    _native._fence_proven(role, stored, token, current)
    yield ("fence (rotate)", rotate, args)


def _bind(sql: str, args: Sequence[Any], style: str) -> Tuple[str, Sequence[Any]]:
    """``sql``'s numbered parameters (``$1``, ``?1``) in the driver's DB-API
    ``paramstyle``, with the arguments in the order the style binds them."""
    order: List[int] = []

    def mark(m: "re.Match[str]") -> str:
        n = int(m.group(1))
        order.append(n)
        if style == "qmark":
            return "?"
        if style == "numeric":
            return f":{n}"
        if style in ("format", "pyformat"):
            return "%s"
        raise InvalidArgumentError(
            f"the fence cannot bind parameters in the DB-API paramstyle {style!r}"
        )

    query = _PLACEHOLDER.sub(mark, sql)
    if style == "numeric":
        return query, tuple(args)
    return query, tuple(args[n - 1] for n in order)


def _store_of(conn: Any, store: Optional[str]) -> str:
    if store is not None:
        if store not in _STORE_NAMES:
            raise InvalidArgumentError(
                f'store must be "postgres" or "sqlite", got {store!r}'
            )
        return store
    if isinstance(conn, sqlite3.Connection):
        return "sqlite"
    if _driver(conn) in ("psycopg", "psycopg2"):
        return "postgres"
    raise InvalidArgumentError(
        f"the fence does not know the dialect of a {type(conn).__module__}.{type(conn).__qualname__}: "
        'pass store="postgres" or store="sqlite"'
    )


def _driver(conn: Any) -> str:
    return type(conn).__module__.split(".", 1)[0]


def _paramstyle(conn: Any) -> str:
    module = sys.modules.get(_driver(conn))
    style = getattr(module, "paramstyle", None)
    if not isinstance(style, str):
        raise InvalidArgumentError(
            f"{type(conn).__module__}.{type(conn).__qualname__} is not a DB-API connection "
            "(its module has no paramstyle)"
        )
    return style


def _db_error(conn: Any, store: str, what: str, role: str, e: Exception) -> _native.KrabkaError:
    """The driver's exception as the core's TransientError or FatalError."""
    return _native._fence_error(what, role, _STORE_NAMES[store], _transient(conn, e), e)


def _transient(conn: Any, e: Exception) -> bool:
    """Whether a new transaction may pass where this one failed: a
    serialization failure or deadlock (SQLSTATE 40001, 40P01), a busy or
    locked SQLite database, a closed connection."""
    code = getattr(e, "sqlstate", None) or getattr(e, "pgcode", None)
    if code in ("40001", "40P01"):
        return True
    if isinstance(e, sqlite3.OperationalError):
        errcode = getattr(e, "sqlite_errorcode", None)
        if errcode is not None:
            return errcode & 0xFF in (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (and their extended codes)
        text = str(e)
        return "locked" in text or "busy" in text
    return bool(getattr(conn, "closed", False))
