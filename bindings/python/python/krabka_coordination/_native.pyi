"""Type stubs of the native module ``krabka_coordination._native``.

Checked against the built module by ``python -m mypy.stubtest`` (ci/python.sh).
The public names are re-exported by the package; the names with a leading
underscore are what the package's ``Client`` / ``AsyncClient`` classes are
built on (each operation returns an ``_Pending`` that they wait for or await).
"""

from datetime import timedelta
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

# The kinds are listed once, in the package (kc.EventKind, kc.ChangeKind).
from ._leadership import EventKind
from ._observe import ChangeKind

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
    "InputOffset",
    "ConsumedOffsets",
    "CommittedOffset",
    "RoleStateReport",
    "RoleView",
    "RosterEntry",
    "TopicReport",
    "_Client",
    "GuardedWrite",
    "_TestCluster",
    "_TestProcess",
    "_EventStream",
    "_LeaderLoop",
    "_Leadership",
    "_Observer",
    "_Pending",
    "_Term",
    "_reset_runtime_after_fork",
    "_runtime_alive_tasks",
    "_runtime_ping",
    "_raise_core_error",
    "_fence_sql",
    "_fence_check",
    "_fence_verdict",
    "_fence_proven",
    "_fence_error",
    "_log_from_core",
    "_sync_log_level",
    "metrics",
    "metrics_text",
    "_before_exit",
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
# A committed-offsets query: topic to partitions, as a dict or as pairs.
_Partitions = Union[Mapping[str, Iterable[int]], Iterable[Tuple[str, Iterable[int]]]]

# ---------------------------------------------------------------- values

@final
class Key:
    """The key of a state record: a registration key (role and member) or a lease
    key (role only)."""

    @staticmethod
    def registration(role: str, member: str) -> Key:
        """The registration key of `member` in `role`."""

    @staticmethod
    def lease(role: str) -> Key:
        """The lease key of `role`."""

    @property
    def kind(self) -> Literal["registration", "lease"]:
        """`"registration"` or `"lease"`."""

    @property
    def role(self) -> str:
        """The role name."""

    @property
    def member(self) -> str:
        """The member id of a registration key; `""` for a lease key."""

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
        """When the member registered, in epoch milliseconds."""

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
        """When the lease was written, in epoch milliseconds of the holder's clock."""

    @property
    def deadline(self) -> int:
        """When a standby may stop waiting, in epoch milliseconds of the holder's clock."""

    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class FencingToken:
    """The leadership token of a role: the producer id and producer epoch Kafka's
    transaction coordinator minted for `transactional.id = <role>`.

    Ordered by `producer_id` first, then `producer_epoch` (the core's `Ord`);
    `NO_EPOCH` ranks below every minted token."""

    def __new__(cls, producer_id: int, producer_epoch: int) -> FencingToken: ...
    @staticmethod
    def parse(text: str) -> FencingToken:
        """The token of its wire form `text` (`"4001/7"`, `"NoEpoch"`), read by
        the core's parser as in every binding. Malformed text is an
        `InvalidArgumentError` quoting it; a non-`str` a `TypeError`."""
    @property
    def producer_id(self) -> int:
        """The producer id the coordinator assigned to the transactional id."""

    @property
    def producer_epoch(self) -> int:
        """The producer epoch within that producer id."""

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
    """Encodes a record key. Raises `EncodeError` (a `ValueError`) for a key the
    layout cannot hold: an empty role, an empty member in a registration key,
    or a role or member over 32767 bytes of UTF-8."""

def decode_key(data: _BytesLike) -> Key:
    """Decodes a record key from `bytes`, `bytearray` or `memoryview`. Raises
    `FormatError` with `part == "key"` for malformed bytes."""

def encode_registration(reg: Registration) -> bytes:
    """Encodes a registration value. Raises `EncodeError` (a `ValueError`) for
    an empty or over-long member."""

def decode_registration(data: _BytesLike) -> Registration:
    """Decodes a registration value from `bytes`, `bytearray` or `memoryview`.
    Raises `FormatError` with `part == "registration value"` for malformed bytes."""

def encode_lease(lease: Lease) -> bytes:
    """Encodes a lease value. Raises `EncodeError` (a `ValueError`) for an empty
    or over-long member."""

def decode_lease(data: _BytesLike) -> Lease:
    """Decodes a lease value from `bytes`, `bytearray` or `memoryview`. Raises
    `FormatError` with `part == "lease value"` for malformed bytes."""

def role_partition(role: str, partitions: int) -> int:
    """The partition of `role` among `partitions`: Kafka's murmur2 of the role's
    UTF-8 bytes, masked with `toPositive`, modulo the partition count. Raises
    `InvalidArgumentError` (a `ValueError`) for an empty role or a count below
    1, and `OverflowError` for a count that is not an i32."""

def murmur2(data: _BytesLike) -> int:
    """Kafka's murmur2 hash (`Utils.murmur2`) of `data`, as a signed 32-bit int."""

def metrics() -> list[dict[str, Any]]:
    """Every series the core has recorded in this process, ordered by name,
    then labels: a list of dicts with `name` (`str`), `help` (`str`, the
    metric's description), `labels` (a `dict` of `str`), `kind`
    (`"counter"`, `"gauge"` or `"histogram"`), and `value` (an `int` for a
    counter, a `float` for a gauge) or, for a histogram (a duration, in
    seconds), `count` (`int`), `sum` (`float`) and `buckets` (a list of
    `(upper bound in seconds, count at or below it)` pairs, the last one
    `(math.inf, count)`)."""

def _before_exit() -> None:
    """Closes the gate of the package's own threads into Python and waits
    (at most 5 s) for the calls inside to return; registered with `atexit`
    by the package."""

def metrics_text() -> str:
    """The same series in the Prometheus text format (version 0.0.4), for a
    `/metrics` endpoint of the application's own web server."""

# ---------------------------------------------------------------- leadership

@final
class _Pending(Generic[_T]):
    """An operation of the core, to be waited for (`wait()`) or awaited, once."""

    def wait(self) -> _T:
        """Runs the operation and blocks until it finishes (the GIL released,
        Ctrl-C interrupting); returns its value or raises its error."""

    def __await__(self) -> Generator[Any, None, _T]: ...

# ---------------------------------------------------------------- testing

@final
class GuardedWrite:
    """One guarded write the test cluster committed."""

    @property
    def commit(self) -> int:
        """Its place in the cluster's commit order (from 0, counting the state
        topic's records too)."""

    @property
    def topic(self) -> str:
        """The topic."""

    @property
    def partition(self) -> int:
        """The partition."""

    @property
    def offset(self) -> int:
        """The offset in the partition."""

    @property
    def key(self) -> bytes:
        """The key (`b""` when the record had none)."""

    @property
    def value(self) -> Optional[bytes]:
        """The value; `None` for a tombstone."""

    @property
    def role(self) -> str:
        """The role whose term wrote it."""

    @property
    def token(self) -> FencingToken:
        """The token of that term."""

    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    __hash__: None  # type: ignore[assignment]

@final
class _TestCluster:
    """An in-memory cluster and its manual clock (the core's `TestCluster`)."""

    def __new__(cls, partitions: Optional[int] = None) -> _TestCluster: ...
    def process(self, name: str) -> _TestProcess:
        """A new process named `name`."""

    @property
    def now_millis(self) -> int:
        """The cluster's wall time (epoch ms)."""

    def advance(self, seconds: Union[float, timedelta]) -> _Pending[None]:
        """Moves the clock forward by `seconds` (a non-negative number or a
        `timedelta`), deadline by deadline, letting the members act at each."""

    def advance_to_next_deadline(self) -> _Pending[Optional[int]]:
        """Moves the clock to the earliest deadline a member waits for; yields
        that instant (epoch ms), or `None` when nobody waits."""

    def settle(self) -> _Pending[None]:
        """Completes once the members have nothing left to do at this instant."""

    def guarded_writes(self) -> List[GuardedWrite]:
        """Every guarded write the cluster committed, in commit order."""

    def committed_offset(self, group: str, topic: str, partition: int) -> Optional[int]:
        """What consumer group `group` has committed for `topic` / `partition`
        (the offset of the next record to read), `None` when nothing: the
        input position that guarded writes with offsets committed; a commit
        still pending does not count."""

    def set_epoch(self, role: str, token: FencingToken) -> None:
        """Sets the coordinator's current token of `role` (the core's
        `MemoryCluster::set_epoch`): the next mint bumps its epoch, or
        rotates to the cluster's next producer id when the epoch is
        exhausted."""
    def describe_leadership(self, role: str) -> _Pending[LeadershipStatus]:
        """What the role's transaction coordinator says now."""

@final
class _TestProcess:
    """One process of a test cluster (the core's `TestProcess`)."""

    @property
    def name(self) -> str:
        """The process's name."""

    @property
    def state(self) -> str:
        """`"running"`, `"cut_off"`, `"paused"` or `"crashed"`."""

    def client(self) -> _Client:
        """A `_Client` on the process's core client (every call returns one on
        the same core client: closing one closes them all)."""

    def crash(self) -> None:
        """SIGKILL: no renewal, no resign, for good."""

    def pause(self) -> None:
        """SIGSTOP: calls and timers wait until `resume`."""

    def resume(self) -> None:
        """SIGCONT; nothing for a crashed process."""

    def cut_off(self) -> None:
        """Each call fails as transient until `heal`."""

    def heal(self) -> None:
        """Ends a cut."""

    def fail_for(self, seconds: Union[float, timedelta]) -> None:
        """Each call fails as transient for `seconds` of the cluster's time."""

@final
class _Client:
    """The core client of one `kafka` settings dict (see the module
    documentation)."""

    def __new__(
        cls,
        kafka: _KafkaSettings,
        partitions: Optional[int] = None,
        state_topic: Optional[str] = None,
        *,
        connect_timeout: Optional[Union[float, timedelta]] = None,
        operation_timeout: Optional[Union[float, timedelta]] = None,
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
        lease_duration: Optional[Union[float, timedelta]] = None,
        renew_interval: Optional[Union[float, timedelta]] = None,
        challenge_stagger: Optional[Union[float, timedelta]] = None,
        timeout: Optional[Union[float, timedelta]] = None,
        on_event: Optional[Callable[[Event], object]] = None,
        event_loop: Optional[Any] = None,
    ) -> _Pending[Optional[_Leadership]]:
        """Acquires `role` as `member`: registers, waits for the turn, mints the
        epoch, writes the first lease. `None` timings keep the core's
        defaults. With a `timeout` (seconds), an acquire that has not won by
        then is cancelled (the member deregisters; a role won in that instant
        is resigned) and the operation yields `None`. `on_event`, a callable,
        gets each of the member's events from its registration on, on the
        `krabka-events` thread or, given an `event_loop`, on that loop
        ([`crate::callbacks`])."""

    def leader_loop(
        self,
        role: str,
        member: str,
        lease_duration: Optional[Union[float, timedelta]] = None,
        renew_interval: Optional[Union[float, timedelta]] = None,
        challenge_stagger: Optional[Union[float, timedelta]] = None,
        on_event: Optional[Callable[[Event], object]] = None,
        event_loop: Optional[Any] = None,
    ) -> _LeaderLoop:
        """A leader loop of `member` in `role` (the shared crate's
        `LeadHandle`, the core's `LeaderLoop`): the timings are checked now,
        before any I/O; nothing starts until the first `next_term`.
        `on_event` and `event_loop` as for `acquire`, for every term."""

    def describe_leadership(self, role: str) -> _Pending[LeadershipStatus]:
        """The role's current token at its transaction coordinator."""

    def describe_role_state(self, role: str) -> _Pending[RoleStateReport]:
        """The roster and the lease of `role`."""

    def ensure_state_topic(
        self,
        development: bool = False,
        replication_factor: Optional[int] = None,
        min_insync_replicas: Optional[int] = None,
    ) -> _Pending[TopicReport]:
        """Creates the state topic unless it exists, then checks it."""

    def check_state_topic(self) -> _Pending[TopicReport]:
        """Checks the state topic: it exists, is compacted and has this
        client's partition count."""

    def observe(self, roles: Iterable[str], renewals: bool = False) -> _Observer:
        """Watches `roles` (a sequence of `str`) without joining them, through
        this client's state reader; `renewals` reports each renewal too. The
        core checks the roles here (none, or one the record layout cannot
        hold: `InvalidArgumentError`) and starts the reads on the runtime;
        nothing blocks on Kafka."""

    def _describe_requests(self) -> int:
        """DescribeTransactions requests sent so far by this client (for tests
        of the request cost)."""

    def close(self) -> _Pending[None]:
        """Closes the client: every later operation raises
        `InvalidArgumentError` ("the client is closed") at once; the pending
        operation resigns every leadership the client holds (all at once,
        each bounded by its lease), cancels its acquires (they raise
        `Cancelled`), stops its leader loops and ends its observers
        (the shared crate's `KafkaClient::close`), then lets go of the
        shared Kafka clients. An interrupted wait lets the close finish
        within a grace period. Idempotent: a later call settles at once
        (in a forked child too: the child closes nothing of its parent's)."""

@final
class _Leadership:
    """The held leadership of a role (see the module documentation)."""

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
        """The partition of `__coordination_state` that holds the role."""

    @property
    def lease(self) -> Lease:
        """The last lease this member wrote."""

    @property
    def renewal_failures(self) -> int:
        """How many renewals in a row have failed with a transient error."""

    @property
    def lease_left(self) -> float:
        """Seconds of the lease left on this member's monotonic clock: what the
        work may still count on. Zero means the term has ended (the local
        deadline passed: `LeaseExpired`), and `is_held` is then false too."""

    @property
    def is_held(self) -> bool:
        """True until the role ends (fenced, resigned, or a fatal error)."""

    @property
    def error(self) -> Optional[KrabkaError]:
        """Why the role ended, as an exception instance (`Fenced`, `Resigned`,
        `FatalError`, ...), or `None` while it is held."""

    def wait(self, timeout: Optional[Union[float, timedelta]] = None) -> _Pending[bool]:
        """Waits until the role ends (`True`) or `timeout` seconds pass
        (`False`; `None`: no limit)."""

    def write(
        self,
        topic: str,
        value: Optional[_BytesLike],
        key: Optional[_BytesLike] = None,
        partition: Optional[int] = None,
        headers: Optional[_Headers] = None,
    ) -> _Pending[None]:
        """A guarded write of one record: one transaction of the epoch-bound
        producer. A deposed leader's write raises `Fenced`."""

    def write_records(self, records: Iterable[OutRecord]) -> _Pending[None]:
        """A guarded write of several records in one transaction: all of them
        become visible, or (fenced) none."""

    def write_with_offsets(self, records: Iterable[OutRecord], offsets: ConsumedOffsets) -> _Pending[None]:
        """A guarded write of `records` (an iterable of `OutRecord`, possibly
        empty) that commits `offsets` (a `ConsumedOffsets`: the input they
        were made from) for its consumer group in the same transaction of
        this term's epoch: both become visible, or neither. A deposed
        leader's write raises `Fenced` and the group's offsets do not move.
        Bad offsets (an empty group or topic, a negative partition or
        offset, a partition named twice) raise `InvalidArgumentError` naming
        the value, nothing sent; after `resign()`, `Resigned`."""

    def committed_offsets(self, group: str, partitions: _Partitions) -> _Pending[List[CommittedOffset]]:
        """What consumer group `group` has committed for `partitions` (a dict
        of topic to partitions, or (topic, partitions) pairs), as a list of
        `CommittedOffset` in the order asked: where a new leader resumes.
        Only offsets of decided transactions are returned (read_committed);
        a pending commit is waited for at most one lease duration, then
        `TransientError`. `offset` is `None` for a partition the group
        committed nothing for. An empty group or topic, a negative partition
        or a partition named twice raises `InvalidArgumentError`."""

    def resign(self) -> _Pending[None]:
        """Gives the role up: the core stops renewing, supersedes the token,
        clears the lease and deregisters. Idempotent. From this call on,
        every write called on this leadership fails with `Resigned`."""

    def events(self) -> _EventStream:
        """The member's events from now on, ending with the term."""

@final
class _LeaderLoop:
    """A leader loop (see the module documentation)."""

    def next_term(self) -> _Pending[Optional[_Term]]:
        """The next term once this member leads (after the backoff the core
        owes), or `None` once the loop is stopped."""

    def finish(self, term: _Term) -> _Pending[None]:
        """Ends `term` after its work returned or raised: the core resigns a
        role still held and owes the backoff before the next term."""

    def stop(self) -> None:
        """Stops the loop: a waiting `next_term` deregisters and yields `None`,
        a running term's end signal fires. Idempotent, from any thread."""

    @property
    def stopped(self) -> bool:
        """True once stopped."""

@final
class _Term:
    """One term of a leader loop: its leadership and its end signal."""

    @property
    def leadership(self) -> _Leadership:
        """The held leadership of the term."""

    @property
    def number(self) -> int:
        """The term's number in its loop, from 1."""

    @property
    def ended(self) -> bool:
        """True once the term ended or the loop was stopped."""

    def wait_ended(self, timeout: Optional[Union[float, timedelta]] = None) -> _Pending[bool]:
        """Waits until the term ends or the loop is stopped (`True`), or
        `timeout` seconds pass (`False`; `None`: no limit)."""

@final
class _EventStream:
    """The event stream of one leadership (`Leadership.events()`)."""

    def next(self) -> _Pending[Optional[Event]]:
        """The next event, or `None` once the term ended and its last events
        were yielded."""

@final
class _Observer:
    """A watch of one or more roles (`Client.observe`), behind the package's
    `Observer` and `AsyncObserver`."""

    def next(self, timeout: Optional[Union[float, timedelta]] = None) -> _Pending[Optional[RoleView]]:
        """The next view, or `None` once the observer is closed or ended (an
        error ends it: raised once, then `None`), or when `timeout` seconds
        (`None`: no limit) pass first. Losing the wait (a timeout, Ctrl-C, a
        cancelled task) loses no view."""

    def close(self) -> None:
        """Stops the reads: a waiting and every later `next` yields `None`.
        Idempotent, from any thread."""

    @property
    def closed(self) -> bool:
        """True once closed, or ended by an error."""

    @property
    def roles(self) -> List[str]:
        """The roles watched, sorted, each once."""

@final
class RoleView:
    """One role as an observer saw it: why it was reported, the leader, the
    lapsed lease, the roster."""

    @property
    def role(self) -> str:
        """The role."""

    @property
    def partition(self) -> int:
        """The partition of the state topic that holds the role."""

    @property
    def change(self) -> ChangeKind:
        """Why this view was reported: the core's stable name of the change
        (`"initial"`, `"elected"`, `"renewed"`, `"cleared"`, `"lapsed"`,
        `"roster"`; the core may add changes)."""

    @property
    def leader(self) -> Optional[Lease]:
        """The leader's lease, or `None`: no lease yet, cleared by a resign, or
        lapsed (see `lapsed`)."""

    @property
    def lapsed(self) -> Optional[Lease]:
        """The lease whose deadline passed without a renewal, while the view has
        no leader because of it (until the role's next lease record)."""

    @property
    def roster(self) -> List[RosterEntry]:
        """The roster in rank order (`roster[i].rank == i`)."""

    @property
    def members(self) -> List[str]:
        """The member ids of the roster in rank order."""

    @property
    def position(self) -> int:
        """The offset the view was read up to (every record of the partition
        below it was read)."""

    @property
    def at(self) -> int:
        """When the view was taken, in epoch milliseconds of the observer's clock."""

    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    __hash__: None  # type: ignore[assignment]

@final
class Event:
    """One step of a member of a role."""

    @property
    def kind(self) -> EventKind:
        """What happened: the core's stable name of the kind (`"registered"`,
        `"waiting"`, `"held_back"`, `"challenging"`, `"lost_challenge"`,
        `"elected"`, `"renewed"`, `"renewal_failing"`, `"write_resolved"`,
        `"retrying"`, `"fenced"`, `"lease_expired"`, `"ended"`, `"resigned"`,
        `"deregistered"`; the core may add kinds)."""

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
        """`registered`: the partition of `__coordination_state`."""

    @property
    def offset(self) -> Optional[int]:
        """`registered`: the offset of the registration record."""

    @property
    def rank(self) -> Optional[int]:
        """`waiting`: the member's place among the challengers (0 first)."""

    @property
    def challenge_at(self) -> Optional[int]:
        """`waiting`: when the member challenges if nothing changes (epoch ms)."""

    @property
    def token(self) -> Optional[FencingToken]:
        """`elected`, `lost_challenge`: the member's token; `waiting` behind a
        lease: the token of the holder (`holder`)."""

    @property
    def holder(self) -> Optional[str]:
        """`waiting` behind a lease: the member the lease names (it may have
        lapsed: `challenge_at` is then its deadline plus the stagger)."""

    @property
    def granted_at(self) -> Optional[int]:
        """`elected`: when the lease was granted (epoch ms)."""

    @property
    def deadline(self) -> Optional[int]:
        """`elected`, `renewed`: the lease deadline (epoch ms)."""

    @property
    def failures(self) -> Optional[int]:
        """`renewal_failing`: how many renewals in a row have failed."""

    @property
    def error(self) -> Optional[KrabkaError]:
        """`renewal_failing`, `retrying`, `fenced`, `ended`: the cause, as the
        exception the package raises for it (the same object every time)."""

    @property
    def cleared(self) -> Optional[bool]:
        """`resigned`: True when the lease was cleared (the hand-over is
        immediate), False when standbys wait for the deadline."""

    @property
    def committed(self) -> Optional[bool]:
        """`write_resolved`: True when the earlier guarded write whose outcome
        was unknown committed (its records are visible), False when not."""

    @property
    def what(self) -> Optional[str]:
        """`retrying`: what failed (`"registering"`, `"minting the epoch"`...)."""

    @property
    def attempt(self) -> Optional[int]:
        """`retrying`: how many times in a row it failed (1 at the first)."""

    @property
    def retry_in(self) -> Optional[float]:
        """`retrying`: the pause before the next try, in seconds."""

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
        """The value (`None`: a tombstone)."""

    @property
    def key(self) -> Optional[bytes]:
        """The key."""

    @property
    def partition(self) -> Optional[int]:
        """The partition, or `None` for the producer's partitioner."""

    @property
    def headers(self) -> List[Tuple[str, bytes]]:
        """The headers as (name, value) pairs."""

    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    __hash__: None  # type: ignore[assignment]

@final
class InputOffset:
    """One input partition's position: the offset of the next record to read
    there (the last one processed, plus one), as a Kafka consumer commits."""

    def __new__(cls, topic: str, partition: int, offset: int, metadata: Optional[str] = None) -> InputOffset: ...
    @property
    def topic(self) -> str:
        """The topic read."""

    @property
    def partition(self) -> int:
        """Its partition."""

    @property
    def offset(self) -> int:
        """The offset of the next record to read."""

    @property
    def metadata(self) -> Optional[str]:
        """Kept with the offset and returned with it (at most the brokers'
        `offset.metadata.max.bytes`, or the commit is refused)."""

    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    __hash__: None  # type: ignore[assignment]

@final
class ConsumedOffsets:
    """The input a guarded write consumed: the offsets to commit for consumer
    group `group` with the write's records, in its transaction. Records and
    offsets commit together or not at all."""

    def __new__(cls, group: str, offsets: Iterable[InputOffset]) -> ConsumedOffsets: ...
    @property
    def group(self) -> str:
        """The consumer group whose offsets are committed."""

    @property
    def offsets(self) -> List[InputOffset]:
        """One entry per input partition."""

    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    __hash__: None  # type: ignore[assignment]

@final
class CommittedOffset:
    """What a consumer group has committed for one partition, as
    `committed_offsets` returns it: only offsets of decided transactions
    (read_committed)."""

    @property
    def topic(self) -> str:
        """The topic."""

    @property
    def partition(self) -> int:
        """The partition."""

    @property
    def offset(self) -> Optional[int]:
        """The offset of the next record to read; `None` when the group has
        committed nothing for the partition (start where your reset policy
        says)."""

    @property
    def metadata(self) -> Optional[str]:
        """The metadata committed with the offset."""

    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    __hash__: None  # type: ignore[assignment]

@final
class LeadershipStatus:
    """The authority of a role as its transaction coordinator reports it."""

    @property
    def token(self) -> FencingToken:
        """The newest token the coordinator minted for the role (`NO_EPOCH` when
        no member has taken it)."""

    def authoritative(self, token: Union[FencingToken, str]) -> bool:
        """True when `token` is the role's current token: its holder is
        authoritative. `NO_EPOCH` never is. `token` is a `FencingToken` or
        its wire form (`"4001/7"`, as `FencingToken.parse` reads it)."""

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
        """The member's place in the roster (0 first): the order of its
        registration."""

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
        """The partition of `__coordination_state` that holds the role."""

    @property
    def roster(self) -> List[RosterEntry]:
        """The roster in rank order (`roster[i].rank == i`)."""

    @property
    def members(self) -> List[str]:
        """The member ids in rank order."""

    @property
    def lease(self) -> Optional[Lease]:
        """The current lease, or `None` (never taken, or cleared by a resign)."""

@final
class TopicReport:
    """What `ensure_state_topic` or `check_state_topic` found or made."""

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
        """The topic's `cleanup.policy` (`compact`)."""

    @property
    def min_insync_replicas(self) -> Optional[int]:
        """The topic's `min.insync.replicas`, when the broker reports it."""

    @property
    def warnings(self) -> List[str]:
        """Advice for the operator (such as a `min.insync.replicas` below 2)."""

# ---------------------------------------------------------------- exceptions

class KrabkaError(Exception):
    """Base class of every exception krabka_coordination raises. `kind` is the stable name of the core error kind of a subclass (None here)."""

    kind: ClassVar[Optional[str]]
    """The stable name of the core error kind (``"FENCED"``...); ``None`` here."""

class FormatError(KrabkaError, ValueError):
    """Malformed record bytes. The error names the record part that failed to decode ("key", "registration value" or "lease value"), and its message the field, the byte offset and the reason."""

    part: Literal["key", "registration value", "lease value"]

class EncodeError(KrabkaError, ValueError):
    """A value the frozen record layout cannot hold (an empty or over-long role or member). The error names the record part and the field; encoding refuses rather than truncating."""

    part: Literal["key", "registration value", "lease value"]
    field: str

class InvalidArgumentError(KrabkaError, ValueError):
    """An argument, option or setting that is refused; the message names it and the value."""

class Fenced(KrabkaError):
    """A newer epoch of the role exists: the broker rejected a write of this member's superseded epoch, or the member lost its epoch otherwise. Stop the work of the role."""

class TransientError(KrabkaError):
    """A transient failure (a broker unreachable, a timeout, a coordinator moving); the operation may be retried. The cause is attached."""

class FatalError(KrabkaError):
    """A failure that retrying will not mend (authorization, configuration, a topic of the wrong shape, a handle used in a process that did not make it). The cause is attached."""

class Resigned(KrabkaError):
    """The leadership was given up by resign."""

class Cancelled(KrabkaError):
    """The operation was cancelled before it finished."""

class LeaseExpired(KrabkaError):
    """The leader's own lease ran out: no renewal committed within the lease duration (on the monotonic clock), so a standby may have taken over. The term is over; stop the work of the role, including work done outside Kafka."""

class OutcomeUnknown(KrabkaError):
    """A write whose commit was sent but not confirmed (a timeout, a fence at the commit): it may or may not have committed. The cause is attached; a fenced cause means a newer epoch exists."""

# ---------------------------------------------------------------- internal

def _runtime_ping(delay_ms: int = 1) -> _Pending[Tuple[int, str]]:
    """An operation that runs a task on the runtime, waits `delay_ms` on the
    runtime's timer, and answers (this pid, the name of the runtime thread
    that ran it). A negative delay fails inside the task with the core's
    `InvalidArgument`, to test how errors of a future reach Python.

    Internal: tests the runtime, the blocking and the asyncio paths."""

def _reset_runtime_after_fork() -> None:
    """Forgets the runtime inherited through a fork. Called in the child by the
    `os.register_at_fork` hook; harmless anywhere else."""

def _runtime_alive_tasks() -> int:
    """The number of tasks alive on this process's runtime (0 when it has none
    yet). Internal: lets the tests see that a cancelled call's task is gone."""

def _raise_core_error(variant: str, message: str, cause: Optional[BaseException] = None) -> NoReturn:
    """Raises the Python exception the mapping makes of a core error of
    `variant`; `cause`, if given, is an exception set as the root of the
    error's source chain (through a plain Rust error in between for
    `"fatal"`), to check that a Python exception travels through the core.
    `"shared"` is a fatal error whose cause is a shared transient error (the
    reason a leadership ended), to check a core cause keeps its class.

    Internal: tests the mapping of every kind."""

def _log_from_core(level: str, message: str, role: str, member: str) -> None:
    """Logs `message` from the core's side at `level` (`"error"`, `"warn"`,
    `"info"`, `"debug"`, `"trace"`) inside a member span of `role` and
    `member`, as the core's own events are.

    Internal: tests the bridge without a Kafka."""

def _sync_log_level() -> None:
    """Reads the `krabka_coordination` logger's effective level again, so that
    a level set after import takes effect (clients call it when made)."""

# The fence of SQL stores (krabka_coordination.stores): the SQL and the rule
# of the Rust crate krabka-coordination-stores.

def _fence_sql(store: str) -> Tuple[str, str, str, str]:
    """The migration and the three statements of `store` (`"postgres"` or
    `"sqlite"`): `(migration, advance, read, rotate)`, each as the Rust
    crate runs it (`$1`-style parameters for PostgreSQL, `?1`-style for
    SQLite: role, producer id, epoch). Raises `ValueError` for another store."""

def _fence_check(role: str, token: FencingToken) -> None:
    """Refuses, before any statement, a role or token no fence can hold:
    `InvalidArgumentError` naming the value."""

def _fence_verdict(role: str, stored: FencingToken, offered: FencingToken) -> None:
    """The verdict on `offered` once the advancing statement returned no row
    and the stored token is `stored`: returns when the offered token needs
    the proof of a rotation (another producer id); raises `Fenced` naming
    the role and both tokens when it is older (the same producer id)."""

def _fence_proven(role: str, stored: FencingToken, offered: FencingToken, current: FencingToken) -> None:
    """Accepts the rotation to `offered` only when `current` (the role's token
    from `describe_leadership`, asked while the fence row was locked) says it
    is the current one; otherwise raises `Fenced` naming the stored, offered
    and current tokens."""

def _fence_error(what: str, role: str, store: str, transient: bool, cause: BaseException) -> KrabkaError:
    """The error of a database call `what` for `role` on `store` (a name for
    the message, e.g. `"PostgreSQL"`), `cause` being the driver's exception:
    `TransientError` when `transient` (a serialization failure, a deadlock,
    a busy database, a lost connection: a new transaction may pass),
    `FatalError` otherwise; returned, for the caller to raise."""
