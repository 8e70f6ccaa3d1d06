"""The one quantity parser against the Kubernetes quantity rules.

Expected values follow the cases of apimachinery's ``pkg/api/resource/quantity_test.go`` (TestQuantityParse,
TestQuantityParseEmit, TestQuantityString and the invalid list), restated here as exact numbers.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricguard.quantity import QuantityError, canonical, integer_count, parse, same

PARSED = [
    ("0", 0, "DecimalSI"), ("0n", 0, "DecimalSI"), ("0Ki", 0, "BinarySI"), ("1", 1, "DecimalSI"),
    ("8Ki", 8 * 1024, "BinarySI"), ("7Mi", 7 * 2**20, "BinarySI"), ("4Pi", 4 * 2**50, "BinarySI"),
    ("2Pi", 2 * 2**50, "BinarySI"), ("3Ei", 3 * 2**60, "BinarySI"),
    ("5n", F(5, 10**9), "DecimalSI"), ("4u", F(4, 10**6), "DecimalSI"), ("3m", F(3, 1000), "DecimalSI"),
    ("50k", 50_000, "DecimalSI"), ("40T", 40 * 10**12, "DecimalSI"), ("1E", 10**18, "DecimalSI"),
    ("1E-3", F(1, 1000), "DecimalExponent"), ("1e3", 1000, "DecimalExponent"),
    ("1.3E+6", 1_300_000, "DecimalExponent"), ("0.5e-2", F(5, 1000), "DecimalExponent"),
    ("100.035k", 100_035, "DecimalSI"), ("0.0005k", F(1, 2), "DecimalSI"), ("9.01", F(901, 100), "DecimalSI"),
    ("8.0", 8, "DecimalSI"), ("2.5P", 25 * 10**14, "DecimalSI"),
    # rounded up to a whole nanounit, away from zero
    ("3.001n", F(4, 10**9), "DecimalSI"), ("1.1E-9", F(2, 10**9), "DecimalExponent"),
    ("0.0000000001", F(1, 10**9), "DecimalSI"), ("0.9n", F(1, 10**9), "DecimalSI"),
    ("0.00000012345", F(124, 10**9), "DecimalSI"),
    # capped at 2^63-1
    ("9Ei", 2**63 - 1, "BinarySI"), ("9223372036854775807Ki", 2**63 - 1, "BinarySI"),
    ("100.035Ki", F(10243584, 100), "BinarySI"), ("0.5Mi", 2**19, "BinarySI"),
    ("0.000000000001Ki", F(2, 10**9), "DecimalSI"),
    (".001", F(1, 1000), "DecimalSI"), ("1.", 1, "DecimalSI"), ("1.G", 10**9, "DecimalSI"),
]


@pytest.mark.parametrize(("text", "amount", "fmt"), PARSED)
def test_parse_like_the_api_server(text: str, amount: int | F, fmt: str) -> None:
    for sign, factor in (("", 1), ("+", 1), ("-", -1)):
        q = parse(sign + text)
        assert q.amount == F(amount) * factor, sign + text
        assert q.format == fmt


@pytest.mark.parametrize("text", ["", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i",
                                  "-3.01e-", " 1", "1 ", "1\n", ".", "1e", "1K", "8 GPUs", "Socket", "1" * 80, "--1"])
def test_garbage_is_refused_with_a_reason(text: str) -> None:
    with pytest.raises(QuantityError, match="not a Kubernetes quantity"):
        parse(text)


@pytest.mark.parametrize(("text", "stored"), [
    ("1Ki", "1Ki"), ("1024Mi", "1Gi"), ("1000M", "1G"), (".001Ki", "1024m"), (".000001Ki", "1024u"),
    (".000000000001Ki", "2n"), ("1000m", "1"), ("8.0", "8"), ("1.08", "1080m"), ("0.5", "500m"),
    ("5000m", "5"), ("1e9", "1e9"), ("80e-3", "80e-3"), (".001e12", "1e9"), ("12E", "12E"), ("1000E", "1e21"), ("9Ei", "9223372036854775807"),
    ("1025Ki", "1025Ki"), ("0.5Ki", "512"), ("-1Gi", "-1Gi"), ("00", "0"), ("250Gi", "250Gi"), ("3k", "3k"),
])
def test_canonical_form_is_what_the_api_server_stores(text: str, stored: str) -> None:
    assert parse(text).canonical() == stored
    assert parse(stored) == parse(text)


def test_json_numbers_and_comparison() -> None:
    assert parse(8) == parse("8") == parse(8.0) == parse("8.0")
    assert same("1Gi", "1024Mi") and same("100m", "0.1") and not same("8", "7")
    assert parse("100m") > parse("50m") and parse("10000T") > parse("100Gi")
    assert parse("9.01").value() == 10 and parse("-9.01").value() == -10 and parse("1.5m").milli_value() == 2
    assert canonical("not a quantity") == "not a quantity" and canonical(8) == "8"


def test_integer_count_of_extended_resources() -> None:
    assert integer_count("8") == 8 and integer_count("8.0") == 8 and integer_count(8) == 8
    assert integer_count("1k") == 1000 and integer_count("2Ki") == 2048
    for bad in ("500m", "1.5", "-1", "x", None, True):
        with pytest.raises(QuantityError):
            integer_count(bad)


@given(st.integers(min_value=-(2**62), max_value=2**62), st.sampled_from(["", "k", "M", "m", "n", "Ki", "Gi", "e3"]))
def test_canonical_round_trip(n: int, suffix: str) -> None:
    q = parse(f"{n}{suffix}")
    assert parse(q.canonical()) == q
    assert parse(q.canonical()).canonical() == q.canonical()


@given(st.text(alphabet="0123456789.+-eEnumkKMGTPi x", max_size=8))
def test_the_grammar_and_the_parser_agree(text: str) -> None:
    from fabricguard.quantity import GRAMMAR

    try:
        parse(text)
        parsed = True
    except QuantityError:
        parsed = False
    assert parsed == (GRAMMAR.match(text) is not None), text
