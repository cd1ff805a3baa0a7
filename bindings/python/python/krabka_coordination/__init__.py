"""Leader election, leases and fencing tokens for active/standby processes on
Apache Kafka: the Python binding of the ``krabka-coordination`` Rust core.

Leadership, in the style of httpx, redis-py and psycopg: build one
:class:`Client` (blocking) or :class:`AsyncClient` (asyncio) from a dict of
Kafka settings and use it for every role::

    client = kc.Client({"bootstrap.servers": "127.0.0.1:19092"})
    with client.acquire_leadership("nightly-report", "host-a") as leadership:
        while not leadership.wait(timeout=1.0):
            leadership.write("report-results", b"...")   # raises Fenced if deposed

:meth:`Client.acquire_leadership` registers a member, waits for its turn and
returns the held :class:`Leadership` (:class:`AsyncLeadership` from the
asyncio client), a context manager whose exit resigns; its
:meth:`~Leadership.events` yields the member's :class:`Event`\\ s. The
clients also describe who is authoritative (:class:`LeadershipStatus`) and a
role's roster and lease (:class:`RoleStateReport`), and create the state
topic (:class:`TopicReport`). :meth:`Client.lead` runs a role's work term
after term (a leader loop: contend, work while leading, contend again);
``on_event=`` hands a member's events to a callback from its registration
on. :meth:`Client.observe` watches roles without
joining them: an :class:`Observer` (:class:`AsyncObserver`) yields a
:class:`RoleView` at each change (a new leader, a resign, a lapsed lease,
the roster).

Underneath, the conformance surface: the record layouts of
``__coordination_state`` (:class:`Key`, :class:`Registration`,
:class:`Lease`, ``encode_*``/``decode_*``, byte-exact with the other ports),
the partition of a role (:func:`role_partition`), and the fencing token and
its order (:class:`FencingToken`, :data:`NO_EPOCH`).

Errors derive from :class:`KrabkaError`, one class per core error kind
(``kind`` is its stable name). Malformed bytes raise :class:`FormatError` (a
``ValueError``) whose ``part`` is ``"key"``, ``"registration value"`` or
``"lease value"``. The core's log events go to the ``logging`` logger
``krabka_coordination``.
"""

import atexit as _atexit

from . import _native
from ._client import AcquireTimeout, AsyncAcquire, AsyncClient, Client, EventCallback, KafkaSettings, OAuthTokenProvider
from ._lead import AsyncLeadWork, AsyncTermEnded, LeadWork, TermEnded
from ._leadership import AsyncEvents, AsyncLeadership, EventKind, Events, Leadership
from ._observe import AsyncObserver, ChangeKind, Observer
from ._native import (
    NO_EPOCH,
    Cancelled,
    CommittedOffset,
    ConsumedOffsets,
    EncodeError,
    Event,
    FatalError,
    Fenced,
    FencingToken,
    FormatError,
    InputOffset,
    InvalidArgumentError,
    Key,
    KrabkaError,
    Lease,
    LeaseExpired,
    LeadershipStatus,
    OutcomeUnknown,
    OutRecord,
    Registration,
    Resigned,
    RoleStateReport,
    RoleView,
    RosterEntry,
    TopicReport,
    TransientError,
    decode_key,
    decode_lease,
    decode_registration,
    encode_key,
    encode_lease,
    encode_registration,
    metrics,
    metrics_text,
    murmur2,
    role_partition,
)

# Keeps the package's own threads (events, asyncio outcomes, log records,
# token requests) out of Python once the interpreter exits: registered
# first, so it runs after the program's own atexit handlers.
_atexit.register(_native._before_exit)

__all__ = [
    "NO_EPOCH",
    "AcquireTimeout",
    "AsyncAcquire",
    "AsyncClient",
    "AsyncEvents",
    "AsyncLeadWork",
    "AsyncLeadership",
    "AsyncObserver",
    "AsyncTermEnded",
    "Cancelled",
    "ChangeKind",
    "Client",
    "CommittedOffset",
    "ConsumedOffsets",
    "EncodeError",
    "Event",
    "EventCallback",
    "EventKind",
    "Events",
    "FatalError",
    "Fenced",
    "FencingToken",
    "FormatError",
    "InputOffset",
    "InvalidArgumentError",
    "KafkaSettings",
    "Key",
    "KrabkaError",
    "Lease",
    "LeadWork",
    "LeaseExpired",
    "Leadership",
    "LeadershipStatus",
    "OAuthTokenProvider",
    "Observer",
    "OutRecord",
    "OutcomeUnknown",
    "Registration",
    "Resigned",
    "RoleStateReport",
    "RoleView",
    "RosterEntry",
    "TermEnded",
    "TopicReport",
    "TransientError",
    "decode_key",
    "decode_lease",
    "decode_registration",
    "encode_key",
    "encode_lease",
    "encode_registration",
    "metrics",
    "metrics_text",
    "murmur2",
    "role_partition",
]
