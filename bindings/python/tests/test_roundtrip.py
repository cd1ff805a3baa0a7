"""Property tests: round trips through the core, canonical decoding of
arbitrary bytes, token order, and the partition range.

``_oracle`` below is an independent ``struct`` reading of the documented
layouts, used only as a second opinion on the bytes the core produces.
"""

from __future__ import annotations

import struct
from typing import Callable, Dict, Tuple

from hypothesis import given
from hypothesis import strategies as st

import krabka_coordination as kc

I64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
I16 = st.integers(min_value=-(2**15), max_value=2**15 - 1)
# Non-empty strings (the layouts refuse empty roles and members) of any code
# point but surrogates, kept short enough for speed; the 32767-byte limit is
# tested in test_errors.py.
NAME = st.text(min_size=1, max_size=40)
TOKEN = st.builds(kc.FencingToken, I64, I16)

def _string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def _oracle_key(kind: int, role: str, member: str) -> bytes:
    return struct.pack(">hh", 0, kind) + _string(role) + _string(member)


@given(role=NAME, member=NAME)
def test_registration_key_round_trip(role: str, member: str) -> None:
    key = kc.Key.registration(role, member)
    data = kc.encode_key(key)
    assert data == _oracle_key(0, role, member)
    assert kc.decode_key(data) == key


@given(role=NAME)
def test_lease_key_round_trip(role: str) -> None:
    key = kc.Key.lease(role)
    data = kc.encode_key(key)
    assert data == _oracle_key(1, role, "")
    assert kc.decode_key(data) == key


@given(member=NAME, registered_at=I64)
def test_registration_round_trip(member: str, registered_at: int) -> None:
    reg = kc.Registration(member, registered_at)
    data = kc.encode_registration(reg)
    assert data == struct.pack(">h", 0) + _string(member) + struct.pack(">q", registered_at)
    assert kc.decode_registration(data) == reg


@given(member=NAME, token=TOKEN, granted_at=I64, deadline=I64)
def test_lease_round_trip(member: str, token: kc.FencingToken, granted_at: int, deadline: int) -> None:
    lease = kc.Lease(member, token, granted_at, deadline)
    data = kc.encode_lease(lease)
    tail = struct.pack(">qhqq", token.producer_id, token.producer_epoch, granted_at, deadline)
    assert data == struct.pack(">h", 0) + _string(member) + tail
    back = kc.decode_lease(bytearray(data))
    assert back == lease and back.token == token


DECODERS: Dict[str, Tuple[Callable[[bytes], object], Callable[..., bytes]]] = {
    "key": (kc.decode_key, kc.encode_key),
    "registration value": (kc.decode_registration, kc.encode_registration),
    "lease value": (kc.decode_lease, kc.encode_lease),
}


def _near_valid() -> st.SearchStrategy[bytes]:
    """Bytes that often get past the version and length checks, so the
    deeper checks are reached as well as the early ones."""
    header = st.sampled_from([b"\x00\x00", b"\x00\x00\x00\x00", b"\x00\x00\x00\x01", b"\x00\x01"])
    return st.builds(lambda h, rest: h + rest, header, st.binary(max_size=60))


@given(part=st.sampled_from(sorted(DECODERS)), data=st.one_of(st.binary(max_size=80), _near_valid()))
def test_any_bytes_decode_canonically_or_raise_format_error(part: str, data: bytes) -> None:
    decode, encode = DECODERS[part]
    try:
        value = decode(data)
    except kc.FormatError as e:
        assert e.part == part
    else:
        # A decoder accepts only canonical bytes: encoding what it read gives
        # the very same bytes back.
        assert encode(value) == data


@given(a=TOKEN, b=TOKEN)
def test_token_order_is_producer_id_then_epoch(a: kc.FencingToken, b: kc.FencingToken) -> None:
    ka = (a.producer_id, a.producer_epoch)
    kb = (b.producer_id, b.producer_epoch)
    assert (a < b) == (ka < kb)
    assert (a <= b) == (ka <= kb)
    assert (a == b) == (ka == kb)
    assert (a > b) == (ka > kb)
    assert (a >= b) == (ka >= kb)
    if a == b:
        assert hash(a) == hash(b)


@given(role=NAME, partitions=st.integers(min_value=1, max_value=2**31 - 1))
def test_role_partition_is_to_positive_murmur2_mod_count(role: str, partitions: int) -> None:
    got = kc.role_partition(role, partitions)
    assert 0 <= got < partitions
    assert got == (kc.murmur2(role.encode("utf-8")) & 0x7FFFFFFF) % partitions
