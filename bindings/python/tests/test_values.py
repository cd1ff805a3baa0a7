"""The value classes: construction, attributes, immutability, equality,
hashing, ordering, repr, pickling, and the accepted input types."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import krabka_coordination as kc


def test_key_constructors_and_attributes() -> None:
    reg = kc.Key.registration("orders", "node-1")
    assert (reg.kind, reg.role, reg.member) == ("registration", "orders", "node-1")
    lease = kc.Key.lease("orders")
    assert (lease.kind, lease.role, lease.member) == ("lease", "orders", "")


def test_registration_and_lease_attributes() -> None:
    reg = kc.Registration("node-1", 1767225600000)
    assert (reg.member, reg.registered_at) == ("node-1", 1767225600000)
    token = kc.FencingToken(4001, 7)
    lease = kc.Lease("node-1", token, 10, 20)
    assert (lease.member, lease.token, lease.granted_at, lease.deadline) == ("node-1", token, 10, 20)
    assert (token.producer_id, token.producer_epoch) == (4001, 7)


def test_reprs() -> None:
    assert repr(kc.FencingToken(5, 3)) == "FencingToken(producer_id=5, producer_epoch=3)"
    assert repr(kc.Key.registration("r", "m")) == "Key.registration(role='r', member='m')"
    assert repr(kc.Key.lease("r'\n")) == "Key.lease(role=\"r'\\n\")"
    assert repr(kc.Registration("m", -1)) == "Registration(member='m', registered_at=-1)"
    assert repr(kc.Lease("m", kc.FencingToken(1, 2), 3, 4)) == (
        "Lease(member='m', token=FencingToken(producer_id=1, producer_epoch=2), granted_at=3, deadline=4)"
    )
    assert repr(kc.NO_EPOCH) == "FencingToken(producer_id=-1, producer_epoch=-1)"


@pytest.mark.parametrize(
    "value",
    [
        kc.Key.registration("r", "m"),
        kc.Key.lease("r"),
        kc.Registration("m", 5),
        kc.Lease("m", kc.FencingToken(1, 2), 3, 4),
        kc.FencingToken(1, 2),
    ],
    ids=repr,
)
def test_repr_round_trips_through_eval(value: Any) -> None:
    namespace = {name: getattr(kc, name) for name in kc.__all__}
    assert eval(repr(value), namespace) == value


@pytest.mark.parametrize(
    "value, attr",
    [
        (kc.Key.lease("r"), "role"),
        (kc.Registration("m", 5), "registered_at"),
        (kc.Lease("m", kc.FencingToken(1, 2), 3, 4), "deadline"),
        (kc.FencingToken(1, 2), "producer_epoch"),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, str) else v,
)
def test_values_are_immutable(value: Any, attr: str) -> None:
    with pytest.raises(AttributeError):
        setattr(value, attr, 1)
    with pytest.raises(AttributeError):
        value.new_attribute = 1


def test_equality_and_hash() -> None:
    a = kc.Lease("m", kc.FencingToken(1, 2), 3, 4)
    assert a == kc.Lease("m", kc.FencingToken(1, 2), 3, 4)
    assert a != kc.Lease("m", kc.FencingToken(1, 3), 3, 4)
    assert a != kc.Lease("n", kc.FencingToken(1, 2), 3, 4)
    assert kc.Key.registration("r", "m") != kc.Key.lease("r")
    assert kc.Registration("m", 1) != kc.Registration("m", 2)
    assert len({kc.Key.lease("r"), kc.Key.lease("r"), kc.Key.registration("r", "m")}) == 2
    assert len({kc.FencingToken(1, 2), kc.FencingToken(1, 2), kc.NO_EPOCH}) == 2
    # Different classes are never equal, and comparing them is not an error.
    assert kc.FencingToken(1, 2) != (1, 2)
    assert kc.Registration("m", 1) != "m"


def test_token_orders_by_producer_id_first() -> None:
    old = kc.FencingToken(7, 32766)
    rotated = kc.FencingToken(8, 0)
    assert rotated > old and old < rotated
    assert kc.NO_EPOCH < kc.FencingToken(0, 0)
    assert sorted([kc.FencingToken(2, 0), kc.NO_EPOCH, kc.FencingToken(1, 5)]) == [
        kc.NO_EPOCH,
        kc.FencingToken(1, 5),
        kc.FencingToken(2, 0),
    ]
    assert max(old, rotated) is rotated


def test_token_refuses_ordering_against_other_types() -> None:
    with pytest.raises(TypeError):
        _ = kc.FencingToken(1, 2) < (1, 3)  # type: ignore[operator]


def test_no_epoch() -> None:
    assert kc.NO_EPOCH == kc.FencingToken(-1, -1)
    assert str(kc.NO_EPOCH) == "NoEpoch"
    assert str(kc.FencingToken(5, 3)) == "5/3"


@pytest.mark.parametrize(
    "token",
    [kc.FencingToken(4001, 7), kc.FencingToken(-4242, -2), kc.FencingToken(-(2**63), -(2**15)),
     kc.FencingToken(2**63 - 1, 2**15 - 1), kc.NO_EPOCH],
)
def test_a_tokens_text_parses_back(token: kc.FencingToken) -> None:
    assert kc.FencingToken.parse(str(token)) == token
    assert kc.FencingToken.parse("-1/-1") == kc.NO_EPOCH


@pytest.mark.parametrize(
    "text", ["", "7", "7/", "/7", "7/3/1", " 7/3", "7/ 3", "+7/3", "7/32768", "9223372036854775808/0", "noepoch", "7.0/3"]
)
def test_malformed_token_text_is_refused_quoting_it(text: str) -> None:
    with pytest.raises(kc.InvalidArgumentError) as info:
        kc.FencingToken.parse(text)
    assert isinstance(info.value, ValueError)
    assert f"{text!r}"[1:-1] in str(info.value) and "is not a fencing token" in str(info.value), str(info.value)
    assert "PRODUCER_ID/EPOCH" in str(info.value)


def test_token_parse_wants_a_str() -> None:
    with pytest.raises(TypeError, match="^token must be a FencingToken or its text, got int$"):
        kc.FencingToken.parse(7)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [
        kc.Key.registration("r", "m"),
        kc.Key.lease("r"),
        kc.Registration("m", 5),
        kc.Lease("m", kc.FencingToken(1, 2), 3, 4),
        kc.NO_EPOCH,
    ],
    ids=repr,
)
def test_pickle_round_trip(value: Any) -> None:
    assert pickle.loads(pickle.dumps(value)) == value


def test_module_of_classes_is_the_public_package() -> None:
    for cls in (kc.Key, kc.Registration, kc.Lease, kc.FencingToken, kc.FormatError):
        assert cls.__module__ == "krabka_coordination", cls


@pytest.mark.parametrize("form", [bytes, bytearray, memoryview])
def test_decoders_accept_bytes_like(form: Any) -> None:
    data = kc.encode_lease(kc.Lease("m", kc.FencingToken(1, 2), 3, 4))
    assert kc.decode_lease(form(data)) == kc.Lease("m", kc.FencingToken(1, 2), 3, 4)
    assert kc.murmur2(form(b"21")) == -973932308


def test_decoder_reads_a_memoryview_slice() -> None:
    data = b"xx" + kc.encode_key(kc.Key.lease("r")) + b"yy"
    assert kc.decode_key(memoryview(data)[2:-2]) == kc.Key.lease("r")


@pytest.mark.parametrize("bad", ["0000", 5, None, [0, 0]])
def test_decoders_refuse_other_types(bad: Any) -> None:
    with pytest.raises(TypeError, match="data must be bytes, bytearray or memoryview"):
        kc.decode_key(bad)


def test_integer_fields_out_of_range_name_the_field() -> None:
    with pytest.raises(OverflowError, match=r"producer_epoch .*i16.*40000"):
        kc.FencingToken(1, 40000)
    with pytest.raises(OverflowError, match=r"producer_epoch .*-32769"):
        kc.FencingToken(1, -32769)
    with pytest.raises(OverflowError, match=r"producer_id .*i64"):
        kc.FencingToken(2**63, 0)
    with pytest.raises(OverflowError, match=r"registered_at"):
        kc.Registration("m", -(2**63) - 1)
    with pytest.raises(OverflowError, match=r"granted_at"):
        kc.Lease("m", kc.NO_EPOCH, 2**64, 0)
    with pytest.raises(OverflowError, match=r"deadline"):
        kc.Lease("m", kc.NO_EPOCH, 0, 2**64)
    with pytest.raises(OverflowError, match=r"partitions .*i32"):
        kc.role_partition("r", 2**31)
    # The bounds themselves are accepted.
    assert kc.FencingToken(1, 32767).producer_epoch == 32767
    assert kc.FencingToken(-(2**63), -32768).producer_id == -(2**63)


def test_wrong_argument_types_name_the_field() -> None:
    with pytest.raises(TypeError, match="producer_epoch must be an int, got str"):
        kc.FencingToken(1, "2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="registered_at must be an int, got float"):
        kc.Registration("m", 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="member must be a str, got bytes"):
        kc.Registration(b"m", 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="role must be a str, got int"):
        kc.Key.lease(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        kc.Lease("m", (1, 2), 3, 4)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        kc.encode_lease(kc.Registration("m", 1))  # type: ignore[arg-type]


def test_role_partition_arguments() -> None:
    assert 0 <= kc.role_partition("orders", 16) < 16
    assert kc.role_partition("orders", 1) == 0
