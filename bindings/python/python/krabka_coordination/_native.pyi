"""Type stubs of the native module ``krabka_coordination._native``.

Checked against the built module by ``python -m mypy.stubtest`` (ci/python.sh).
"""

import asyncio
from typing import Final, Literal, NoReturn, Optional, Tuple, Union, final

__all__ = [
    "FencingToken",
    "Key",
    "Lease",
    "Registration",
    "decode_key",
    "decode_lease",
    "decode_registration",
    "encode_key",
    "encode_lease",
    "encode_registration",
    "murmur2",
    "role_partition",
    "_reset_runtime_after_fork",
    "_runtime_alive_tasks",
    "_runtime_ping",
    "_runtime_ping_async",
    "_raise_core_error",
    "KrabkaError",
    "FormatError",
    "EncodeError",
    "InvalidArgumentError",
    "Fenced",
    "TransientError",
    "FatalError",
    "Resigned",
    "Cancelled",
    "NO_EPOCH",
]

_BytesLike = Union[bytes, bytearray, memoryview]

# ---------------------------------------------------------------- values

@final
class Key:
    """The key of a state record: a registration key (role and member) or a
    lease key (role only)."""

    @staticmethod
    def registration(role: str, member: str) -> Key:
        """The registration key of ``member`` in ``role``."""

    @staticmethod
    def lease(role: str) -> Key:
        """The lease key of ``role``."""

    @property
    def kind(self) -> Literal["registration", "lease"]:
        """``"registration"`` or ``"lease"``."""

    @property
    def role(self) -> str:
        """The role name."""

    @property
    def member(self) -> str:
        """The member id of a registration key; ``""`` for a lease key."""

    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Registration:
    """The value of a registration record."""

    def __new__(cls, member: str, registered_at: int) -> Registration: ...
    @property
    def member(self) -> str:
        """The registering member."""

    @property
    def registered_at(self) -> int:
        """When the member registered, in epoch milliseconds (i64)."""

    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Lease:
    """The value of a lease record."""

    def __new__(cls, member: str, token: FencingToken, granted_at: int, deadline: int) -> Lease: ...
    @property
    def member(self) -> str:
        """The member that holds the lease."""

    @property
    def token(self) -> FencingToken:
        """The holder's fencing token."""

    @property
    def granted_at(self) -> int:
        """When the lease was written, in epoch milliseconds (i64) of the holder's clock."""

    @property
    def deadline(self) -> int:
        """When a standby may stop waiting, in epoch milliseconds (i64) of the holder's clock."""

    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class FencingToken:
    """The leadership token of a role: (producer id, producer epoch), ordered
    by producer id first. ``NO_EPOCH`` ranks below every minted token."""

    def __new__(cls, producer_id: int, producer_epoch: int) -> FencingToken: ...
    @property
    def producer_id(self) -> int:
        """The producer id (i64)."""

    @property
    def producer_epoch(self) -> int:
        """The producer epoch (i16)."""

    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    def __lt__(self, value: FencingToken, /) -> bool: ...
    def __le__(self, value: FencingToken, /) -> bool: ...
    def __gt__(self, value: FencingToken, /) -> bool: ...
    def __ge__(self, value: FencingToken, /) -> bool: ...
    def __hash__(self) -> int: ...

NO_EPOCH: Final[FencingToken]
"""The token of a role that no member has taken: ``FencingToken(-1, -1)``."""

# ---------------------------------------------------------------- functions

def encode_key(key: Key) -> bytes:
    """Encodes a record key; ``EncodeError`` for a key the layout cannot hold."""

def decode_key(data: _BytesLike) -> Key:
    """Decodes a record key; ``FormatError`` (part ``"key"``) for malformed bytes."""

def encode_registration(reg: Registration) -> bytes:
    """Encodes a registration value; ``EncodeError`` for an empty or over-long member."""

def decode_registration(data: _BytesLike) -> Registration:
    """Decodes a registration value; ``FormatError`` (part ``"registration value"``)."""

def encode_lease(lease: Lease) -> bytes:
    """Encodes a lease value; ``EncodeError`` for an empty or over-long member."""

def decode_lease(data: _BytesLike) -> Lease:
    """Decodes a lease value; ``FormatError`` (part ``"lease value"``)."""

def role_partition(role: str, partitions: int) -> int:
    """The partition of ``role`` among ``partitions`` (Kafka's murmur2, toPositive)."""

def murmur2(data: _BytesLike) -> int:
    """Kafka's murmur2 hash of ``data`` as a signed 32-bit int."""

# ---------------------------------------------------------------- exceptions

class KrabkaError(Exception):
    """Base class of every exception krabka_coordination raises."""

class FormatError(KrabkaError, ValueError):
    """Malformed record bytes; ``part`` names the record part."""

    part: Literal["key", "registration value", "lease value"]

class EncodeError(KrabkaError, ValueError):
    """A value the record layout cannot hold; ``part`` and ``field`` name it."""

    part: Literal["key", "registration value", "lease value"]
    field: str

class InvalidArgumentError(KrabkaError, ValueError):
    """An argument the core refuses."""

class Fenced(KrabkaError):
    """The broker fenced this member's epoch; stop the work of the role."""

class TransientError(KrabkaError):
    """A failure that retrying may mend; ``__cause__`` holds the cause."""

class FatalError(KrabkaError):
    """A failure that retrying will not mend; ``__cause__`` holds the cause."""

class Resigned(KrabkaError):
    """The leadership was given up."""

class Cancelled(KrabkaError):
    """The operation was cancelled before it finished."""

# ---------------------------------------------------------------- internal

def _runtime_ping() -> Tuple[int, str]:
    """Runs a task on the runtime; returns (pid that built it, worker thread name)."""

def _reset_runtime_after_fork() -> None:
    """Retires a runtime inherited through fork (the os.register_at_fork hook)."""

def _runtime_ping_async(delay_ms: int = 1) -> asyncio.Future[Tuple[int, str]]:
    """The awaitable twin of ``_runtime_ping``; needs a running event loop."""

def _runtime_alive_tasks() -> int:
    """Tasks alive on this process's runtime (0 before it is built)."""

def _raise_core_error(variant: str, message: str, cause: Optional[BaseException] = None) -> NoReturn:
    """Raises what error.rs makes of a core error ``variant`` (tests the mapping)."""
