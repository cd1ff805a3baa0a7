"""Leader election, leases and fencing tokens for active/standby processes on
Apache Kafka: the Python binding of the ``krabka-coordination`` Rust core.

Everything here is the core's own code, reached through the native module
``krabka_coordination._native``: the record layouts of ``__coordination_state``
(byte-exact with the other ports), the partition of a role, and the fencing
token and its order.

Values (:class:`Key`, :class:`Registration`, :class:`Lease`,
:class:`FencingToken`) are immutable, comparable with ``==`` and hashable;
:class:`FencingToken` also orders (producer id first, then epoch).

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
    Registration,
    Resigned,
    TransientError,
    decode_key,
    decode_lease,
    decode_registration,
    encode_key,
    encode_lease,
    encode_registration,
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
    "Registration",
    "Resigned",
    "TransientError",
    "decode_key",
    "decode_lease",
    "decode_registration",
    "encode_key",
    "encode_lease",
    "encode_registration",
    "murmur2",
    "role_partition",
]
