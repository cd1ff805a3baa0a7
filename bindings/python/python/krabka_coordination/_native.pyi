"""Type stubs of the native module ``krabka_coordination._native``.

Checked against the built module by ``python -m mypy.stubtest`` (ci/python.sh).
The public names are re-exported by the package; the names with a leading
underscore are what the package's ``Client`` / ``AsyncClient`` classes are
built on (each operation returns an ``_Pending`` that they wait for or await).
"""

from typing import (
    Any,
    Callable,
    ClassVar,
    Final,
    Generator,
    Generic,
    Iterable,
    List,
    Literal,
    Mapping,
    NoReturn,
    Optional,
    Tuple,
    TypeVar,
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
    "Event",
    "LeadershipStatus",
    "OutRecord",
    "RoleStateReport",
    "RosterEntry",
    "TopicReport",
    "_Client",
    "_EventStream",
    "_Leadership",
    "_Pending",
    "_reset_runtime_after_fork",
    "_runtime_alive_tasks",
    "_runtime_ping",
    "_raise_core_error",
    "_log_from_core",
    "_sync_log_level",
    "metrics",
    "metrics_text",
    "KrabkaError",
    "FormatError",
    "EncodeError",
    "InvalidArgumentError",
    "Fenced",
    "TransientError",
    "FatalError",
    "Resigned",
    "Cancelled",
    "LeaseExpired",
    "OutcomeUnknown",
    "NO_EPOCH",
]

_T = TypeVar("_T", covariant=True)

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

def metrics() -> list[dict[str, Any]]:
    """Every series the core has recorded in this process (README, "Metrics"):
    dicts with ``name``, ``labels`` (a dict), ``kind`` (``"counter"``,
    ``"gauge"`` or ``"summary"``) and ``value``, or for a summary (a
    duration, in seconds) ``count`` and ``sum``."""

def metrics_text() -> str:
    """The same series in the Prometheus text format (version 0.0.4)."""

# ---------------------------------------------------------------- leadership

@final
class _Pending(Generic[_T]):
    """An operation of the core, not yet started: ``wait()`` runs it as a
    blocking call, ``await`` runs it on the asyncio loop. Once."""

    def wait(self) -> _T:
        """Runs the operation, blocking (GIL released, Ctrl-C interrupting)."""

    def __await__(self) -> Generator[Any, None, _T]: ...

@final
class _Client:
    """The core client of one ``kafka`` settings dict, shared by every role."""

    def __new__(
        cls,
        kafka: _KafkaSettings,
        partitions: Optional[int] = None,
        state_topic: Optional[str] = None,
        *,
        connect_timeout: Optional[float] = None,
        operation_timeout: Optional[float] = None,
        oauth_token: Optional[Callable[[], Union[Tuple[str, float], Tuple[str, float, str]]]] = None,
    ) -> _Client: ...
    @property
    def partitions(self) -> int:
        """The partition count of the state topic."""

    @property
    def state_topic(self) -> str:
        """The name of the state topic."""

    @property
    def closed(self) -> bool:
        """True once closed."""

    def acquire(
        self,
        role: str,
        member: str,
        lease_duration: Optional[float] = None,
        renew_interval: Optional[float] = None,
        challenge_stagger: Optional[float] = None,
    ) -> _Pending[_Leadership]:
        """Registers, waits for the turn and takes the role."""

    def describe_leadership(self, role: str) -> _Pending[LeadershipStatus]:
        """The role's current token at its transaction coordinator."""

    def describe_role_state(self, role: str) -> _Pending[RoleStateReport]:
        """The roster and the lease of ``role``."""

    def ensure_state_topic(
        self,
        development: bool = False,
        replication_factor: Optional[int] = None,
        min_insync_replicas: Optional[int] = None,
    ) -> _Pending[TopicReport]:
        """Creates the state topic unless it exists, then checks it."""

    def check_state_topic(self) -> _Pending[TopicReport]:
        """Checks the state topic."""

    def _describe_requests(self) -> int:
        """DescribeTransactions requests sent so far by this client."""

    def close(self) -> None:
        """Lets go of the shared Kafka clients; idempotent."""

@final
class _Leadership:
    """The held leadership of a role (the core's handle)."""

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
        """Why the role ended, or ``None``."""

    def wait(self, timeout: Optional[float] = None) -> _Pending[bool]:
        """Waits until the role ends (True) or ``timeout`` seconds pass (False)."""

    def write(
        self,
        topic: str,
        value: Optional[_BytesLike],
        key: Optional[_BytesLike] = None,
        partition: Optional[int] = None,
        headers: Optional[_Headers] = None,
    ) -> _Pending[None]:
        """A guarded write of one record."""

    def write_records(self, records: Iterable[OutRecord]) -> _Pending[None]:
        """A guarded write of several records in one transaction."""

    def resign(self) -> _Pending[None]:
        """Gives the role up."""

    def events(self) -> _EventStream:
        """The member's events from now on, ending with the term."""

@final
class _EventStream:
    """The event stream of one leadership."""

    def next(self) -> _Pending[Optional[Event]]:
        """The next event, or None once the stream ended."""

@final
class Event:
    """One step of a member of a role: ``kind`` says what happened; the
    kind's own fields are set, the others are ``None``."""

    @property
    def kind(self) -> str:
        """What happened, the core's stable name: ``"registered"``,
        ``"waiting"``, ``"held_back"``, ``"challenging"``, ``"lost_challenge"``,
        ``"elected"``, ``"renewed"``, ``"renewal_failing"``, ``"retrying"``,
        ``"fenced"``, ``"lease_expired"``, ``"ended"``, ``"resigned"``,
        ``"deregistered"`` (the core may add kinds)."""

    @property
    def role(self) -> str:
        """The role."""

    @property
    def member(self) -> str:
        """The member id."""

    @property
    def at(self) -> int:
        """When the step was taken, in epoch milliseconds of the member's clock."""

    @property
    def partition(self) -> Optional[int]:
        """``registered``: the partition of ``__coordination_state``."""

    @property
    def offset(self) -> Optional[int]:
        """``registered``: the offset of the registration record."""

    @property
    def rank(self) -> Optional[int]:
        """``waiting``: the member's place among the challengers."""

    @property
    def challenge_at(self) -> Optional[int]:
        """``waiting``: when the member challenges if nothing changes."""

    @property
    def token(self) -> Optional[FencingToken]:
        """``elected``, ``lost_challenge``: the token."""

    @property
    def granted_at(self) -> Optional[int]:
        """``elected``: when the lease was granted."""

    @property
    def deadline(self) -> Optional[int]:
        """``elected``, ``renewed``: the lease deadline."""

    @property
    def failures(self) -> Optional[int]:
        """``renewal_failing``: failed renewals in a row."""

    @property
    def error(self) -> Optional[KrabkaError]:
        """``renewal_failing``, ``retrying``, ``fenced``, ``ended``: the cause."""

    @property
    def cleared(self) -> Optional[bool]:
        """``resigned``: True when the lease was cleared."""

    @property
    def what(self) -> Optional[str]:
        """``retrying``: what failed."""

    @property
    def attempt(self) -> Optional[int]:
        """``retrying``: how many times in a row it failed."""

    @property
    def retry_in(self) -> Optional[float]:
        """``retrying``: the pause before the next try, in seconds."""

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
    """What ``ensure_state_topic`` or ``check_state_topic`` found or made."""

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

# ---------------------------------------------------------------- exceptions

class KrabkaError(Exception):
    """Base class of every exception krabka_coordination raises."""

    kind: ClassVar[Optional[str]]
    """The stable name of the core error kind (``"FENCED"``...); ``None`` here."""

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

class LeaseExpired(KrabkaError):
    """The leader's own lease ran out (no renewal committed within the lease
    duration): the term is over; stop the work of the role."""

class OutcomeUnknown(KrabkaError):
    """A write whose commit was sent but not confirmed: it may or may not have
    committed; ``__cause__`` holds the cause (a :class:`Fenced` one means a
    newer epoch exists)."""

# ---------------------------------------------------------------- internal

def _runtime_ping(delay_ms: int = 1) -> _Pending[Tuple[int, str]]:
    """Runs a task on the runtime: (this pid, the runtime thread that ran it)."""

def _reset_runtime_after_fork() -> None:
    """Forgets a runtime inherited through fork (the os.register_at_fork hook)."""

def _runtime_alive_tasks() -> int:
    """Tasks alive on this process's runtime (0 before it is built)."""

def _raise_core_error(variant: str, message: str, cause: Optional[BaseException] = None) -> NoReturn:
    """Raises what the mapping makes of a core error ``variant`` (tests the mapping)."""

def _log_from_core(level: str, message: str, role: str, member: str) -> None:
    """Logs ``message`` through the core's tracing, inside a member span."""

def _sync_log_level() -> None:
    """Reads the ``krabka_coordination`` logger's effective level again."""
