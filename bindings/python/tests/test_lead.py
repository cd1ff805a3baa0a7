"""The leader loop on the real Kafka (``Client.lead``, ``AsyncClient.lead``):
two members alternate as the role is handed over and one of them is killed.
Member a runs in this process: its first term's work returns once b waits
(the hand-over), its later terms wait for the term's end signal. Member b is
a separate process (``lead_proc.py``, the blocking or the asyncio loop)
that prints each term's token; it is SIGKILLed while it leads, and a's next
term follows. Stopping a resigns the role and deregisters a. Also: a work
that raises ends ``lead`` with that exception after resigning; bad
arguments are refused before any I/O; Ctrl-C stops a waiting loop after
the member deregistered.
"""

from __future__ import annotations

import asyncio
import queue
import signal
import threading
import time
from types import FrameType
from typing import Any, Dict, List, Optional, Tuple

import pytest

import krabka_coordination as kc
from kafka_support import LEAD_SCRIPT, Member, Timings, members, token_of, wait_until

# A 3 s lease renewed every second, half a second between challenger ranks.
TIMINGS = Timings(lease_duration=3.0, renew_interval=1.0, challenge_stagger=0.5)
MEMBER_ARGS = ("--lease", "3", "--renew", "1", "--stagger", "0.5")


def next_item(q: "queue.Queue[Any]", what: str, within: float) -> Any:
    try:
        return q.get(timeout=within)
    except queue.Empty:
        pytest.fail(f"no {what} within {within} s")


def expect_waiting_behind(events: "queue.Queue[kc.Event]", holder: str, within: float) -> kc.Event:
    """a's next ``waiting`` event naming ``holder`` (other events skipped)."""
    deadline = time.monotonic() + within
    while True:
        e: kc.Event = next_item(events, f"a waiting behind {holder}", max(deadline - time.monotonic(), 0.0))
        if e.kind == "waiting" and e.holder == holder:
            return e


def assert_resigned_and_gone(client: kc.Client, role: str, last: kc.FencingToken) -> None:
    state = client.describe_role_state(role)
    assert state.lease is None and state.members == [], repr(state)
    # The resign minted one more epoch: the last term's token is superseded.
    assert not client.describe_leadership(role).authoritative(last)


def test_blocking_lead_hands_over_fails_over_and_stops(client: kc.Client, kafka: Dict[str, str], role: str) -> None:
    ca = kc.Client(kafka)
    stop = threading.Event()
    handover = threading.Event()
    terms: "queue.Queue[Tuple[int, kc.FencingToken, bool]]" = queue.Queue()
    a_events: "queue.Queue[kc.Event]" = queue.Queue()
    outcome: List[Optional[BaseException]] = []
    b: Optional[Member] = None

    def work(leadership: kc.Leadership, ended: kc.TermEnded) -> None:
        terms.put((ended.number, leadership.token, ended.is_set()))
        if ended.number == 1:
            # The hand-over: return once b waits; the loop resigns.
            if not handover.wait(60):
                raise AssertionError("the test never let the first term go")
            return
        ended.wait()  # until the loop is stopped

    def run() -> None:
        try:
            ca.lead(role, "a", work, on_event=a_events.put, stop=stop, **TIMINGS)
            outcome.append(None)
        except BaseException as e:
            outcome.append(e)

    a_thread = threading.Thread(target=run, daemon=True)
    a_thread.start()
    try:
        number, token_a1, was_ended = next_item(terms, "a's first term", 30)
        assert (number, was_ended) == (1, False)
        assert client.describe_leadership(role).token == token_a1

        b = Member(kafka, role, "b", *MEMBER_ARGS, script=LEAD_SCRIPT)
        wait_until(lambda: members(role) == ["a", "b"], 30, "b waiting behind a")
        handover.set()
        term_b = b.expect("term", 20)
        token_b = token_of(term_b)
        assert term_b["number"] == 1 and token_b > token_a1
        assert client.describe_leadership(role).token == token_b

        # a contends again, from the tail: it waits behind b's lease.
        waiting = expect_waiting_behind(a_events, "b", 20)
        assert waiting.token == token_b, repr(waiting)
        assert members(role) == ["b", "a"]

        # The crash: b is SIGKILLed while it leads; a's second term follows
        # once b's lease runs out.
        b.send(signal.SIGKILL)
        number, token_a2, was_ended = next_item(terms, "a's second term", 3.0 + 20)
        assert (number, was_ended) == (2, False)
        assert token_a2 > token_b
        assert client.describe_leadership(role).token == token_a2
        assert outcome == [], outcome

        # Stop: the running term is told, the role resigned, lead returns.
        stop.set()
        a_thread.join(20)
        assert not a_thread.is_alive(), "lead did not return after stop"
        assert outcome == [None], outcome
        assert_resigned_and_gone(client, role, token_a2)
        assert terms.empty(), "no third term"
    finally:
        stop.set()
        handover.set()
        if b is not None:
            b.kill()
        a_thread.join(20)
        ca.close()


def test_async_lead_hands_over_fails_over_and_stops_when_cancelled(
    client: kc.Client, kafka: Dict[str, str], role: str
) -> None:
    """a is AsyncClient.lead in this process, b AsyncClient.lead in a
    separate process (``lead_proc.py --asyncio``), SIGKILLed while it leads;
    a stops when its task is cancelled."""
    b: Optional[Member] = None

    async def main() -> None:
        nonlocal b
        loop_thread = threading.get_native_id()
        handover = asyncio.Event()
        terms: "asyncio.Queue[Tuple[int, kc.FencingToken, bool]]" = asyncio.Queue()
        waiting_behind_b: "asyncio.Queue[kc.Event]" = asyncio.Queue()
        callback_threads: List[int] = []

        def on_event(event: kc.Event) -> None:
            callback_threads.append(threading.get_native_id())
            if event.kind == "waiting" and event.holder == "b":
                waiting_behind_b.put_nowait(event)

        started: List[int] = []

        async def work(leadership: kc.AsyncLeadership, ended: kc.AsyncTermEnded) -> None:
            started.append(1)
            assert isinstance(ended, asyncio.Event)
            # The term's number in the loop, as the blocking TermEnded has it.
            terms.put_nowait((ended.number, leadership.token, ended.is_set()))
            if not handover.is_set():
                await handover.wait()
                return  # the hand-over
            await ended.wait()

        async with kc.AsyncClient(kafka) as ca:
            a = asyncio.ensure_future(ca.lead(role, "a", work, on_event=on_event, **TIMINGS))
            try:
                number, token_a1, was_ended = await asyncio.wait_for(terms.get(), 30)
                assert (number, was_ended) == (1, False)
                assert (await ca.describe_leadership(role)).token == token_a1

                b = Member(kafka, role, "b", "--asyncio", *MEMBER_ARGS, script=LEAD_SCRIPT)
                deadline = time.monotonic() + 30
                while (await ca.describe_role_state(role)).members != ["a", "b"]:
                    assert time.monotonic() < deadline, "b never waited behind a"
                    await asyncio.sleep(0.1)
                handover.set()
                term_b = await asyncio.to_thread(b.expect, "term", 20)
                token_b = token_of(term_b)
                assert token_b > token_a1
                assert (await ca.describe_leadership(role)).token == token_b
                waiting = await asyncio.wait_for(waiting_behind_b.get(), 20)
                assert waiting.token == token_b, repr(waiting)

                b.send(signal.SIGKILL)
                number, token_a2, was_ended = await asyncio.wait_for(terms.get(), 3.0 + 20)
                assert (number, was_ended) == (2, False)
                assert token_a2 > token_b
                assert (await ca.describe_leadership(role)).token == token_a2
                assert not a.done()
            finally:
                a.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await a
            assert set(callback_threads) == {loop_thread}, "on_event ran on the loop"
            # The cancel resigned the role (the resign is awaited inside lead).
            state = await ca.describe_role_state(role)
            assert state.lease is None and state.members == [], repr(state)
            assert not (await ca.describe_leadership(role)).authoritative(token_a2)

    try:
        asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        if b is not None:
            b.kill()


def test_a_work_that_raises_ends_lead_with_it_after_resigning(client: kc.Client, kafka: Dict[str, str], role: str) -> None:
    tokens: List[kc.FencingToken] = []

    def work(leadership: kc.Leadership, ended: kc.TermEnded) -> None:
        tokens.append(leadership.token)
        raise ValueError("the work failed")

    with kc.Client(kafka) as c:
        with pytest.raises(ValueError, match="the work failed"):
            c.lead(role, "a", work, **TIMINGS)
    assert len(tokens) == 1, "no second term after the work raised"
    assert_resigned_and_gone(client, role, tokens[0])


def test_an_async_work_that_raises_ends_lead_with_it_after_resigning(
    client: kc.Client, kafka: Dict[str, str], role: str
) -> None:
    tokens: List[kc.FencingToken] = []

    async def work(leadership: kc.AsyncLeadership, ended: asyncio.Event) -> None:
        tokens.append(leadership.token)
        raise ValueError("the async work failed")

    async def main() -> None:
        async with kc.AsyncClient(kafka) as c:
            with pytest.raises(ValueError, match="the async work failed"):
                await c.lead(role, "a", work, **TIMINGS)

    asyncio.run(asyncio.wait_for(main(), 60))
    assert len(tokens) == 1
    assert_resigned_and_gone(client, role, tokens[0])


def test_lead_refuses_bad_arguments_before_any_io() -> None:
    # Nothing answers at 127.0.0.1:1: a refusal that waited for the
    # cluster would not come back at once.
    def work(leadership: kc.Leadership, ended: kc.TermEnded) -> None:
        raise AssertionError("never called")

    started = time.monotonic()
    with kc.Client({"bootstrap.servers": "127.0.0.1:1"}) as c:
        with pytest.raises(TypeError, match="work must be a callable"):
            c.lead("r", "m", 42)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="stop must be a threading.Event"):
            c.lead("r", "m", work, stop=True)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="on_event must be a callable"):
            c.lead("r", "m", work, on_event=1)  # type: ignore[arg-type]
        with pytest.raises(kc.InvalidArgumentError, match="must exceed the renew interval"):
            c.lead("r", "m", work, lease_duration=1.0, renew_interval=2.0)
        with pytest.raises(kc.InvalidArgumentError, match="lease_duration must be a positive"):
            c.lead("r", "m", work, lease_duration=-1)
        with pytest.raises(kc.InvalidArgumentError, match="NUL"):
            c.lead("r\0", "m", work)
        with pytest.raises(TypeError, match="role"):
            c.lead(7, "m", work)  # type: ignore[arg-type]

    async def main() -> None:
        async def async_work(leadership: kc.AsyncLeadership, ended: asyncio.Event) -> None:
            raise AssertionError("never called")

        async with kc.AsyncClient({"bootstrap.servers": "127.0.0.1:1"}) as c:
            with pytest.raises(TypeError, match="work must be a callable"):
                await c.lead("r", "m", None)  # type: ignore[arg-type]
            with pytest.raises(kc.InvalidArgumentError, match="must exceed the renew interval"):
                await c.lead("r", "m", async_work, lease_duration=1.0, renew_interval=2.0)

    asyncio.run(main())
    assert time.monotonic() - started < 2.0, "the refusals needed no cluster"


def test_ctrl_c_stops_a_waiting_lead_after_deregistering(client: kc.Client, kafka: Dict[str, str], role: str) -> None:
    def interrupt(signum: int, frame: Optional[FrameType]) -> None:
        raise KeyboardInterrupt

    def work(leadership: kc.Leadership, ended: kc.TermEnded) -> None:
        raise AssertionError("b never leads: a holds the role")

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with kc.Client(kafka) as ca, kc.Client(kafka) as cb, ca.acquire_leadership(role, "a", **TIMINGS):
            waiting = threading.Event()

            def on_event(event: kc.Event) -> None:
                if event.kind == "waiting":
                    waiting.set()

            # The alarm fires once b waits behind a (its waiting event).
            def arm() -> None:
                if waiting.wait(20):
                    signal.setitimer(signal.ITIMER_REAL, 0.05)

            threading.Thread(target=arm, daemon=True).start()
            with pytest.raises(KeyboardInterrupt):
                cb.lead(role, "b", work, on_event=on_event, **TIMINGS)
            assert waiting.is_set()
            # Deregistered before KeyboardInterrupt was raised.
            assert members(role) == ["a"]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
