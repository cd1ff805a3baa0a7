"""Every golden vector of the repository, through the package.

Each test walks a whole file and counts what it checked, then asserts the
count equals the number of entries in the file (and that the file is not
empty), so a vector that is skipped or a file that shrinks to nothing fails
the suite instead of passing it quietly. Failures are collected and reported
together with the case names.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List

import pytest

import krabka_coordination as kc

DECODERS: Dict[str, Callable[[Any], object]] = {
    "key": kc.decode_key,
    "registration value": kc.decode_registration,
    "lease value": kc.decode_lease,
}

PARTS = set(DECODERS)


def _expected_value(case: Dict[str, Any]) -> object:
    """The value a record case lists, built from its JSON fields (i64 fields
    are strings of decimal digits, i16 numbers)."""
    part = case["part"]
    if part == "key":
        if case["kind"] == "registration":
            return kc.Key.registration(case["role"], case["member"])
        assert case["kind"] == "lease", case["name"]
        assert case["member"] == "", case["name"]
        return kc.Key.lease(case["role"])
    if part == "registration value":
        return kc.Registration(case["member"], int(case["registered_at"]))
    assert part == "lease value", case["name"]
    return kc.Lease(
        case["member"],
        kc.FencingToken(int(case["producer_id"]), case["producer_epoch"]),
        int(case["granted_at"]),
        int(case["deadline"]),
    )


def _check_fields(case: Dict[str, Any], got: Any) -> None:
    """The decoded value's attributes, one by one, against the case."""
    part = case["part"]
    if part == "key":
        assert got.kind == case["kind"]
        assert got.role == case["role"]
        assert got.member == case["member"]
    elif part == "registration value":
        assert got.member == case["member"]
        assert got.registered_at == int(case["registered_at"])
    else:
        assert got.member == case["member"]
        assert got.token.producer_id == int(case["producer_id"])
        assert got.token.producer_epoch == case["producer_epoch"]
        assert got.granted_at == int(case["granted_at"])
        assert got.deadline == int(case["deadline"])


def _encode(value: object) -> bytes:
    if isinstance(value, kc.Key):
        return kc.encode_key(value)
    if isinstance(value, kc.Registration):
        return kc.encode_registration(value)
    assert isinstance(value, kc.Lease)
    return kc.encode_lease(value)


def test_record_cases_decode_and_encode_exactly(records: Dict[str, Any]) -> None:
    cases: List[Dict[str, Any]] = records["cases"]
    assert cases, "records.json has no cases"
    checked = 0
    per_part = {p: 0 for p in PARTS}
    failures: List[str] = []
    for case in cases:
        try:
            data = bytes.fromhex(case["hex"])
            decode = DECODERS[case["part"]]
            expected = _expected_value(case)
            for form in (data, bytearray(data), memoryview(data)):
                got = decode(form)
                assert got == expected, f"decoded {got!r} from {type(form).__name__}"
                assert hash(got) == hash(expected)
                _check_fields(case, got)
            assert _encode(expected) == data, "encoding the listed fields"
        except Exception as e:  # collected: every case is reported
            failures.append(f"{case['name']!r} ({case['part']}): {e!r}")
        else:
            checked += 1
            per_part[case["part"]] += 1
    assert not failures, "\n".join(failures)
    assert checked == len(cases)
    assert all(per_part.values()), f"a part has no cases: {per_part}"


def test_malformed_entries_raise_format_error_with_their_part(records: Dict[str, Any]) -> None:
    malformed: List[Dict[str, Any]] = records["malformed"]
    assert malformed, "records.json has no malformed entries"
    checked = 0
    per_part = {p: 0 for p in PARTS}
    failures: List[str] = []
    for entry in malformed:
        data = bytes.fromhex(entry["hex"])
        decode = DECODERS[entry["part"]]
        try:
            value = decode(data)
        except kc.FormatError as e:
            if e.part != entry["part"]:
                failures.append(f"{entry['name']!r}: part {e.part!r}, expected {entry['part']!r}")
            elif not isinstance(e, ValueError) or not str(e):
                failures.append(f"{entry['name']!r}: {e!r} is not a ValueError with a message")
            else:
                checked += 1
                per_part[entry["part"]] += 1
        except Exception as e:
            failures.append(f"{entry['name']!r}: raised {e!r}, not FormatError")
        else:
            failures.append(f"{entry['name']!r}: decoded to {value!r}")
    assert not failures, "\n".join(failures)
    assert checked == len(malformed)
    assert all(per_part.values()), f"a part has no malformed entries: {per_part}"


def test_partitions(partitions: Dict[str, Any]) -> None:
    cases: List[Dict[str, Any]] = partitions["cases"]
    assert cases, "partitions.json has no cases"
    checked = 0
    failures: List[str] = []
    for case in cases:
        role = case["role"]
        got_hash = kc.murmur2(role.encode("utf-8"))
        got = kc.role_partition(role, case["partitions"])
        if got_hash != case["murmur2"] or got != case["partition"]:
            failures.append(
                f"{role!r} in {case['partitions']}: murmur2 {got_hash} partition {got}, "
                f"expected {case['murmur2']} {case['partition']}"
            )
        else:
            checked += 1
    assert not failures, "\n".join(failures[:50])
    assert checked == len(cases)
    # The file's own coverage claim: a hash whose absolute value differs from
    # toPositive (a negative one) must be among the cases.
    assert any(c["murmur2"] < 0 for c in cases)


def _token(t: Dict[str, Any]) -> kc.FencingToken:
    return kc.FencingToken(int(t["producer_id"]), t["producer_epoch"])


def test_token_order(tokens: Dict[str, Any]) -> None:
    cases: List[Dict[str, Any]] = tokens["cases"]
    assert cases, "tokens.json has no cases"
    checked = 0
    seen = set()
    failures: List[str] = []
    for case in cases:
        a, b = _token(case["a"]), _token(case["b"])
        order = case["order"]
        got = {
            "<": a < b,
            "<=": a <= b,
            "==": a == b,
            "!=": a != b,
            ">": a > b,
            ">=": a >= b,
        }
        want = {
            "<": order == "less",
            "<=": order in ("less", "equal"),
            "==": order == "equal",
            "!=": order != "equal",
            ">": order == "greater",
            ">=": order in ("greater", "equal"),
        }
        if got != want:
            failures.append(f"{a!r} vs {b!r}: {got}, expected {order}")
        elif order == "equal" and hash(a) != hash(b):
            failures.append(f"{a!r} == {b!r} but their hashes differ")
        else:
            checked += 1
            seen.add(order)
    assert not failures, "\n".join(failures)
    assert checked == len(cases)
    assert seen == {"less", "equal", "greater"}


@pytest.mark.parametrize("name", ["records.json", "partitions.json", "tokens.json"])
def test_golden_files_are_present(name: str) -> None:
    from conftest import GOLDEN_DIR

    assert (GOLDEN_DIR / name).is_file(), f"{GOLDEN_DIR / name} is missing"
