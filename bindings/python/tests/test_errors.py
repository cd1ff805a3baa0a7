"""The exception hierarchy and what the core's errors become."""

from __future__ import annotations

from typing import Callable, List, Tuple

import pytest

import krabka_coordination as kc

MAX = 32767


def test_hierarchy() -> None:
    assert issubclass(kc.KrabkaError, Exception)
    for cls in (kc.FormatError, kc.EncodeError, kc.InvalidArgumentError):
        assert issubclass(cls, kc.KrabkaError) and issubclass(cls, ValueError), cls
    for other in (kc.Fenced, kc.TransientError, kc.FatalError, kc.Resigned, kc.Cancelled, kc.LeaseExpired, kc.OutcomeUnknown):
        assert issubclass(other, kc.KrabkaError) and not issubclass(other, ValueError), other
    assert kc.FormatError.__doc__ and "part" in kc.FormatError.__doc__


def test_exceptions_are_importable_from_native_and_package_alike() -> None:
    from krabka_coordination import _native

    assert _native.FormatError is kc.FormatError
    assert _native.KrabkaError is kc.KrabkaError


@pytest.mark.parametrize(
    "decode, part",
    [(kc.decode_key, "key"), (kc.decode_registration, "registration value"), (kc.decode_lease, "lease value")],
)
def test_format_error_part_and_message(decode: object, part: str) -> None:
    with pytest.raises(kc.FormatError) as info:
        decode(b"\x00\x00\x00")  # type: ignore[operator]
    assert info.value.part == part
    assert str(info.value).startswith(f"malformed {part}: ")
    assert "offset" in str(info.value)


def test_format_error_names_field_and_offset() -> None:
    good = kc.encode_registration(kc.Registration("m", 1))
    with pytest.raises(kc.FormatError) as info:
        kc.decode_registration(good + b"\x00")
    assert info.value.part == "registration value"
    # The wording is the core's own; what it must say is where and what.
    message = str(info.value)
    assert "trailing" in message and "offset 13" in message, message


def test_encode_error_is_a_value_error_with_part_and_field() -> None:
    cases: List[Tuple[Callable[[], bytes], str, str, str]] = [
        (lambda: kc.encode_key(kc.Key.lease("")), "key", "role", "must not be empty"),
        (lambda: kc.encode_key(kc.Key.registration("r", "")), "key", "member", "must not be empty"),
        (lambda: kc.encode_registration(kc.Registration("", 0)), "registration value", "member", "must not be empty"),
        (lambda: kc.encode_lease(kc.Lease("", kc.NO_EPOCH, 0, 0)), "lease value", "member", "must not be empty"),
        (lambda: kc.encode_key(kc.Key.lease("r" * (MAX + 1))), "key", "role", "32768 bytes"),
        (
            lambda: kc.encode_lease(kc.Lease("é" * (MAX // 2 + 1), kc.NO_EPOCH, 0, 0)),
            "lease value",
            "member",
            "32768 bytes",
        ),
    ]
    for encode, part, field, words in cases:
        with pytest.raises(ValueError) as info:
            encode()
        err = info.value
        assert isinstance(err, kc.EncodeError) and isinstance(err, kc.KrabkaError)
        assert (err.part, err.field) == (part, field)
        assert f"cannot encode {part}: {field}" in str(err)
        assert words in str(err)


def test_longest_string_is_accepted() -> None:
    role = "r" * MAX
    assert kc.decode_key(kc.encode_key(kc.Key.lease(role))).role == role


def test_lone_surrogates_are_refused_as_value_errors() -> None:
    with pytest.raises(ValueError):
        kc.Key.lease("\ud800")


def test_role_partition_refusals_are_invalid_argument_errors() -> None:
    with pytest.raises(kc.InvalidArgumentError, match="role must not be empty"):
        kc.role_partition("", 3)
    with pytest.raises(ValueError, match="partitions must be at least 1, got 0"):
        kc.role_partition("r", 0)
    with pytest.raises(kc.InvalidArgumentError, match="got -1"):
        kc.role_partition("r", -1)


# The one mapping in error.rs, by the core's error kind (_raise_core_error
# builds a core error and raises what the mapping makes of it).
MAPPING = [
    ("format", kc.FormatError, "FORMAT", "malformed lease value: m"),
    ("encode", kc.EncodeError, "ENCODE", "cannot encode key: role m"),
    ("invalid_argument", kc.InvalidArgumentError, "INVALID_ARGUMENT", "m"),
    ("fenced", kc.Fenced, "FENCED", "fenced: m"),
    ("resigned", kc.Resigned, "RESIGNED", "the leadership was resigned"),
    ("cancelled", kc.Cancelled, "CANCELLED", "cancelled"),
    ("transient", kc.TransientError, "TRANSIENT", "transient m: the broker did not answer"),
    ("fatal", kc.FatalError, "FATAL", "fatal m: the topic has the wrong shape"),
    ("lease_expired", kc.LeaseExpired, "LEASE_EXPIRED", "the lease expired: m"),
    ("outcome_unknown", kc.OutcomeUnknown, "OUTCOME_UNKNOWN", "outcome unknown m: fenced: newer epoch"),
]


@pytest.mark.parametrize("variant, cls, kind, message", MAPPING, ids=[m[0] for m in MAPPING])
def test_every_core_error_kind_maps_to_its_class(variant: str, cls: type, kind: str, message: str) -> None:
    from krabka_coordination import _native

    with pytest.raises(kc.KrabkaError) as info:
        _native._raise_core_error(variant, "m")
    assert type(info.value) is cls
    assert str(info.value) == message
    # The class carries the kind's stable name, and its docstring is the
    # kind's description from the table every binding shares.
    assert info.value.kind == cls.kind == kind
    assert cls.__doc__ and cls.__doc__.endswith(".")


def test_the_base_class_has_no_kind() -> None:
    assert kc.KrabkaError.kind is None
    classes = [m[1] for m in MAPPING]
    kinds = [c.kind for c in classes]
    assert len(set(kinds)) == len(kinds) == 10


def test_an_unknown_outcome_keeps_its_fenced_cause() -> None:
    from krabka_coordination import _native

    with pytest.raises(kc.OutcomeUnknown) as info:
        _native._raise_core_error("outcome_unknown", "committing")
    assert type(info.value.__cause__) is kc.Fenced


def test_a_core_error_in_the_cause_chain_keeps_its_class() -> None:
    from krabka_coordination import _native

    # The reason a leadership ended travels as a cause: its class is its
    # kind's, not a bare KrabkaError.
    with pytest.raises(kc.FatalError) as info:
        _native._raise_core_error("shared", "the leadership ended")
    cause = info.value.__cause__
    assert type(cause) is kc.TransientError, type(cause)
    assert str(cause) == "transient renewing: the broker did not answer"
    assert isinstance(cause.__cause__, kc.KrabkaError) and str(cause.__cause__) == "the broker did not answer"


def test_format_and_encode_errors_from_the_mapping_carry_their_parts() -> None:
    from krabka_coordination import _native

    with pytest.raises(kc.FormatError) as fmt:
        _native._raise_core_error("format", "m")
    assert fmt.value.part == "lease value"
    with pytest.raises(kc.EncodeError) as enc:
        _native._raise_core_error("encode", "m")
    assert (enc.value.part, enc.value.field) == ("key", "role")


def test_cause_chain_of_a_transient_error() -> None:
    from krabka_coordination import _native

    with pytest.raises(kc.TransientError) as info:
        _native._raise_core_error("transient", "fetching the lease")
    cause = info.value.__cause__
    assert isinstance(cause, kc.KrabkaError) and str(cause) == "the broker did not answer"
    assert cause.__cause__ is None


def test_python_exception_travels_through_the_core_as_itself() -> None:
    from krabka_coordination import _native

    inner = LookupError("raised by a callback")
    with pytest.raises(kc.TransientError) as transient:
        _native._raise_core_error("transient", "calling back", inner)
    assert transient.value.__cause__ is inner
    # Two links: a Rust error, whose source is the Python exception.
    with pytest.raises(kc.FatalError) as fatal:
        _native._raise_core_error("fatal", "checking the topic", inner)
    middle = fatal.value.__cause__
    assert isinstance(middle, kc.KrabkaError) and str(middle) == "the topic has the wrong shape"
    assert middle.__cause__ is inner


def test_unknown_variant_is_refused() -> None:
    from krabka_coordination import _native

    with pytest.raises(ValueError, match='unknown variant "nope"'):
        _native._raise_core_error("nope", "m")
