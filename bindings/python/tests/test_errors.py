"""The exception hierarchy and what the core's errors become."""

from __future__ import annotations

import pytest

import krabka_coordination as kc

MAX = 32767


def test_hierarchy() -> None:
    assert issubclass(kc.KrabkaError, Exception)
    for cls in (kc.FormatError, kc.EncodeError, kc.InvalidArgumentError):
        assert issubclass(cls, kc.KrabkaError) and issubclass(cls, ValueError), cls
    for cls in (kc.Fenced, kc.TransientError, kc.FatalError, kc.Resigned, kc.Cancelled):
        assert issubclass(cls, kc.KrabkaError) and not issubclass(cls, ValueError), cls
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
    cases = [
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
