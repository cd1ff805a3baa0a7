"""Type stubs of the native module ``krabka_coordination._native``.

Checked against the built module by ``python -m mypy.stubtest`` (ci/python.sh).
"""

import asyncio
from types import TracebackType
from typing import (
    Final,
    Iterable,
    List,
    Literal,
    Mapping,
    NoReturn,
    Optional,
    Tuple,
    Type,
    Union,
    final,
)

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
    "Leadership",
    "LeadershipStatus",
    "OutRecord",
    "RoleStateReport",
    "RosterEntry",
    "TopicReport",
    "acquire_leadership",
    "acquire_leadership_blocking",
    "describe_leadership",
    "describe_leadership_blocking",
    "describe_role_state",
    "describe_role_state_blocking",
    "ensure_state_topic",
    "ensure_state_topic_blocking",
    "_reset_runtime_after_fork",
    "_runtime_alive_tasks",
    "_runtime_ping",
    "_runtime_ping_async",
    "_raise_core_error",
    "_describe_requests",
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

_KafkaSettings = Mapping[str, Union[str, int, float, bool]]
"""The ``kafka`` argument: librdkafka client settings (a ``dict``), with
``"bootstrap.servers"`` at least."""

_Headers = Union[Mapping[str, _BytesLike], Iterable[Tuple[str, _BytesLike]]]

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

# ---------------------------------------------------------------- leadership

@final
class OutRecord:
    """One record of a guarded write."""

    def __new__(
        cls,
        topic: str,
        value: Optional[_BytesLike],
        key: Optional[_BytesLike] = None,
        partition: Optional[int] = None,
        headers: Optional[_Headers] = None,
    ) -> OutRecord: ...
    @property
    def topic(self) -> str:
        """The topic."""

    @property
    def value(self) -> Optional[bytes]:
        """The value (``None``: a tombstone)."""

    @property
    def key(self) -> Optional[bytes]:
        """The key."""

    @property
    def partition(self) -> Optional[int]:
        """The partition, or ``None`` for the producer's partitioner."""

    @property
    def headers(self) -> List[Tuple[str, bytes]]:
        """The headers as (name, value) pairs."""

    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    __hash__: None  # type: ignore[assignment]

@final
class Leadership:
    """The held leadership of a role (the core's handle; renews in the background)."""

    @property
    def token(self) -> FencingToken:
        """The fencing token of this term."""

    @property
    def role(self) -> str:
        """The role."""

    @property
    def member(self) -> str:
        """The member id."""

    @property
    def partition(self) -> int:
        """The partition of ``__coordination_state`` that holds the role."""

    @property
    def lease(self) -> Lease:
        """The last lease this member wrote."""

    @property
    def renewal_failures(self) -> int:
        """How many renewals in a row have failed with a transient error."""

    @property
    def is_held(self) -> bool:
        """True until the role ends."""

    @property
    def error(self) -> Optional[KrabkaError]:
        """Why the role ended (``Fenced``, ``Resigned``, ``FatalError``...), or ``None``."""

    def done(self) -> asyncio.Future[None]:
        """Completes when the role ends."""

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the role ends or ``timeout`` seconds pass; True when it ended."""

    def write(
        self,
        topic: str,
        value: Optional[_BytesLike],
        key: Optional[_BytesLike] = None,
        partition: Optional[int] = None,
        headers: Optional[_Headers] = None,
    ) -> asyncio.Future[None]:
        """A guarded write of one record; ``Fenced`` when the member was deposed."""

    def write_blocking(
        self,
        topic: str,
        value: Optional[_BytesLike],
        key: Optional[_BytesLike] = None,
        partition: Optional[int] = None,
        headers: Optional[_Headers] = None,
    ) -> None:
        """A guarded write of one record (blocking)."""

    def write_records(self, records: Iterable[OutRecord]) -> asyncio.Future[None]:
        """A guarded write of several records in one transaction."""

    def write_records_blocking(self, records: Iterable[OutRecord]) -> None:
        """A guarded write of several records in one transaction (blocking)."""

    def resign(self) -> asyncio.Future[None]:
        """Gives the role up: supersedes the token, clears the lease, deregisters."""

    def resign_blocking(self) -> None:
        """Gives the role up (blocking)."""

    def __enter__(self) -> Leadership: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None: ...
    def __aenter__(self) -> asyncio.Future[Leadership]: ...
    def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> asyncio.Future[None]: ...

@final
class LeadershipStatus:
    """The authority of a role as its transaction coordinator reports it."""

    @property
    def token(self) -> FencingToken:
        """The role's current token (``NO_EPOCH`` when no member has taken it)."""

    def authoritative(self, token: FencingToken) -> bool:
        """True when ``token`` is the role's current token."""

    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    __hash__: None  # type: ignore[assignment]

@final
class RosterEntry:
    """One member of a role's roster."""

    @property
    def member(self) -> str:
        """The member id."""

    @property
    def rank(self) -> int:
        """The member's place in the roster (0 first)."""

    @property
    def offset(self) -> int:
        """The offset of the member's latest registration record."""

    @property
    def registered_at(self) -> int:
        """When the member registered, in epoch milliseconds of its clock."""

    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    __hash__: None  # type: ignore[assignment]

@final
class RoleStateReport:
    """The roster (in rank order) and the lease of a role."""

    @property
    def role(self) -> str:
        """The role."""

    @property
    def partition(self) -> int:
        """The partition of ``__coordination_state`` that holds the role."""

    @property
    def roster(self) -> List[RosterEntry]:
        """The roster in rank order."""

    @property
    def members(self) -> List[str]:
        """The member ids in rank order."""

    @property
    def lease(self) -> Optional[Lease]:
        """The current lease, or ``None``."""

@final
class TopicReport:
    """What ``ensure_state_topic`` found or made."""

    @property
    def topic(self) -> str:
        """The topic's name."""

    @property
    def created(self) -> bool:
        """True when this call created the topic."""

    @property
    def partitions(self) -> int:
        """The partition count."""

    @property
    def replication_factor(self) -> int:
        """The replica count of partition 0."""

    @property
    def cleanup_policy(self) -> str:
        """The topic's ``cleanup.policy``."""

    @property
    def min_insync_replicas(self) -> Optional[int]:
        """The topic's ``min.insync.replicas``, when the broker reports it."""

    @property
    def warnings(self) -> List[str]:
        """Advice for the operator."""

def acquire_leadership(
    kafka: _KafkaSettings,
    role: str,
    member: str,
    *,
    partitions: int = 16,
    lease_duration: float = 30.0,
    renew_interval: float = 10.0,
    challenge_stagger: float = 5.0,
) -> asyncio.Future[Leadership]:
    """Registers, waits for the member's turn and takes the role; cancelling deregisters."""

def acquire_leadership_blocking(
    kafka: _KafkaSettings,
    role: str,
    member: str,
    *,
    partitions: int = 16,
    lease_duration: float = 30.0,
    renew_interval: float = 10.0,
    challenge_stagger: float = 5.0,
) -> Leadership:
    """The blocking form of ``acquire_leadership``; Ctrl-C deregisters, then raises."""

def describe_leadership(kafka: _KafkaSettings, role: str) -> asyncio.Future[LeadershipStatus]:
    """The role's current token from its transaction coordinator."""

def describe_leadership_blocking(kafka: _KafkaSettings, role: str) -> LeadershipStatus:
    """The blocking form of ``describe_leadership``."""

def describe_role_state(kafka: _KafkaSettings, role: str, partitions: int = 16) -> asyncio.Future[RoleStateReport]:
    """The roster and the lease of ``role``, read from its partition."""

def describe_role_state_blocking(kafka: _KafkaSettings, role: str, partitions: int = 16) -> RoleStateReport:
    """The blocking form of ``describe_role_state``."""

def ensure_state_topic(
    kafka: _KafkaSettings, partitions: int = 16, replication_factor: int = 1, min_insync_replicas: int = 1
) -> asyncio.Future[TopicReport]:
    """Creates ``__coordination_state`` if missing, then checks its shape."""

def ensure_state_topic_blocking(
    kafka: _KafkaSettings, partitions: int = 16, replication_factor: int = 1, min_insync_replicas: int = 1
) -> TopicReport:
    """The blocking form of ``ensure_state_topic``."""

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

def _describe_requests(kafka: _KafkaSettings) -> int:
    """Requests sent so far by the describe client kept for ``kafka``."""
