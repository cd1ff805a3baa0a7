"""Leader election, leases and fencing tokens for active/standby processes on
Apache Kafka: the Python binding of the ``krabka-coordination`` Rust core.

Everything here is the core's own code, reached through the native module
``krabka_coordination._native``: the record layouts of ``__coordination_state``
(byte-exact with the other ports), the partition of a role, and the fencing
token and its order.

Values (:class:`Key`, :class:`Registration`, :class:`Lease`,
:class:`FencingToken`) are immutable, comparable with ``==`` and hashable;
:class:`FencingToken` also orders (producer id first, then epoch).

Leadership on Kafka: :func:`acquire_leadership` (asyncio) and
:func:`acquire_leadership_blocking` register a member of a role, wait for its
turn and return the held :class:`Leadership` (a context manager whose exit
resigns); :func:`describe_leadership` asks who is authoritative and
:func:`describe_role_state` reads a role's roster and lease. The ``kafka``
argument is a dict of librdkafka settings passed through to the core's Kafka
transport. A deposed member's guarded write raises :class:`Fenced`.

Errors derive from :class:`KrabkaError`. Malformed bytes raise
:class:`FormatError` (a ``ValueError``) whose ``part`` is ``"key"``,
``"registration value"`` or ``"lease value"``; a value the layout cannot hold
raises :class:`EncodeError` (a ``ValueError``).
"""

from ._native import (
    NO_EPOCH,
    Cancelled,
    EncodeError,
    FatalError,
    Fenced,
    FencingToken,
    FormatError,
    InvalidArgumentError,
    Key,
    KrabkaError,
    Lease,
    Leadership,
    LeadershipStatus,
    OutRecord,
    Registration,
    Resigned,
    RoleStateReport,
    RosterEntry,
    TopicReport,
    TransientError,
    acquire_leadership,
    acquire_leadership_blocking,
    decode_key,
    decode_lease,
    decode_registration,
    describe_leadership,
    describe_leadership_blocking,
    describe_role_state,
    describe_role_state_blocking,
    encode_key,
    encode_lease,
    encode_registration,
    ensure_state_topic,
    ensure_state_topic_blocking,
    murmur2,
    role_partition,
)

__all__ = [
    "NO_EPOCH",
    "Cancelled",
    "EncodeError",
    "FatalError",
    "Fenced",
    "FencingToken",
    "FormatError",
    "InvalidArgumentError",
    "Key",
    "KrabkaError",
    "Lease",
    "Leadership",
    "LeadershipStatus",
    "OutRecord",
    "Registration",
    "Resigned",
    "RoleStateReport",
    "RosterEntry",
    "TopicReport",
    "TransientError",
    "acquire_leadership",
    "acquire_leadership_blocking",
    "decode_key",
    "decode_lease",
    "decode_registration",
    "describe_leadership",
    "describe_leadership_blocking",
    "describe_role_state",
    "describe_role_state_blocking",
    "encode_key",
    "encode_lease",
    "encode_registration",
    "ensure_state_topic",
    "ensure_state_topic_blocking",
    "murmur2",
    "role_partition",
]
