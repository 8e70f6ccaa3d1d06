"""Kubernetes resource quantities (``resource.Quantity``): the one parser every part of fabricguard uses.

Grammar, as the API server reads it::

    quantity  ::= [sign] number suffix
    number    ::= digits | digits "." [digits] | "." digits
    suffix    ::= "" | n | u | m | k | M | G | T | P | E            (decimal SI)
               |  Ki | Mi | Gi | Ti | Pi | Ei                     (binary SI)
               |  ("e" | "E") [sign] digits                       (decimal exponent)

No whitespace is allowed inside the string (JSON numbers such as ``8`` or ``8.0`` are read as their text).
Like the API server, a parsed value is rounded up (away from zero) to a whole nanounit, and a binary one is
capped at ``2**63 - 1``. :meth:`Quantity.canonical` gives the form the API server stores (``1024Mi`` is
stored as ``1Gi``, ``1000m`` as ``1``, ``8.0`` as ``8``). :func:`integer_count` reads a count of an integer
resource (GPUs, RDMA devices), which the API server refuses when it is not whole.

Pure: no I/O, no imports beyond the standard library.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIX = {v: k for k, v in _DECIMAL_SI.items()}
_BINARY_SUFFIX = {0: "", **{v: k for k, v in _BINARY_SI.items()}}
# The whole grammar in one expression (digits required before or after the point); `\Z`, not `$`, so that a
# trailing newline is refused as the API server refuses it.
GRAMMAR = re.compile(r"([+-]?)(?=\.?[0-9])([0-9]*)(?:\.([0-9]*))?((?:[KMGTPE]i)|[eE][+-]?[0-9]+|[numkMGTPE])?\Z")
_NUMBER = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)", re.S)  # only to say what is wrong
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)")
_MAX = 2**63 - 1
_NANO = Fraction(1, 10**9)
_ZERO = Fraction(0)


class QuantityError(ValueError):
    """Text that is not a Kubernetes quantity; the message says what is wrong and shows a valid form."""


@dataclass(frozen=True)
class Quantity:
    """An exact quantity (a multiple of 1e-9) and the format its suffix asked for."""

    amount: Fraction
    format: Format = "DecimalSI"

    def __eq__(self, other: object) -> bool:
        # Equal amounts are the same quantity whatever the suffix: 1Gi == 1024Mi == 1073741824.
        return isinstance(other, Quantity) and self.amount == other.amount

    def __hash__(self) -> int:
        return hash(self.amount)

    def __lt__(self, other: Quantity) -> bool:
        return self.amount < other.amount

    def __le__(self, other: Quantity) -> bool:
        return self.amount <= other.amount

    def value(self) -> int:
        """The value rounded up (away from zero) to an integer, as ``Quantity.Value()`` does."""
        return _round_away(self.amount)

    def milli_value(self) -> int:
        """The value in thousandths, rounded up (away from zero), as ``Quantity.MilliValue()`` does."""
        return _round_away(self.amount * 1000)

    @property
    def is_integer(self) -> bool:
        return self.amount.denominator == 1

    def canonical(self) -> str:
        """The text the API server stores and returns for this quantity."""
        a = self.amount
        if a == 0:
            return "0"
        sign = "-" if a < 0 else ""
        mag = abs(a)
        fmt = self.format
        if fmt == "BinarySI" and (mag < 1024 or mag.denominator != 1):
            fmt = "DecimalSI"  # no rounding, and no "0.5Ki"
        if fmt == "BinarySI":
            n, exp = int(mag), 0
            while n % 1024 == 0 and exp < 60:
                n //= 1024
                exp += 10
            return f"{sign}{n}{_BINARY_SUFFIX[exp]}"
        # Integer mantissa with an exponent that is a multiple of 3, as short as it goes.
        exp = -9
        n = int(mag * 10**9)
        while n % 1000 == 0 and n:
            n //= 1000
            exp += 3
        if fmt == "DecimalSI" and exp <= 18:
            return f"{sign}{n}{_DECIMAL_SUFFIX[exp]}"
        return f"{sign}{n}" + (f"e{exp}" if exp else "")

    def __str__(self) -> str:
        return self.canonical()


def _round_away(x: Fraction) -> int:
    n = x.numerator // x.denominator if x >= 0 else -((-x.numerator) // x.denominator)
    if n != x:
        n += 1 if x > 0 else -1
    return n


def parse(text: object) -> Quantity:
    """Parse a quantity as the API server does, or raise :class:`QuantityError` naming the problem."""
    if isinstance(text, str | int | float) and not isinstance(text, bool):
        return _parse_cached(text)  # workloads repeat the same few amounts ("8", "1", "250Gi")
    return _parse(text)


def _parse(text: object) -> Quantity:
    if isinstance(text, bool):
        raise QuantityError(f"{text!r} is not a Kubernetes quantity; write a number such as 8, 500m or 16Gi")
    if isinstance(text, int | float):
        text = repr(text) if isinstance(text, float) else str(text)
    if not isinstance(text, str):
        raise QuantityError(f"{text!r} is not a Kubernetes quantity; write a number such as 8, 500m or 16Gi")
    shown = text if len(text) <= 40 else text[:37] + "..."
    m = GRAMMAR.match(text)
    if m is None:
        _explain(text, shown)
    assert m is not None
    sign, whole, frac, suffix = m.group(1), m.group(2), m.group(3), m.group(4) or ""
    if len(whole) + len(frac or "") + len(suffix) > 64:
        raise QuantityError(f"{shown!r} is not a Kubernetes quantity the API server accepts: too many digits")
    number = Fraction(int(whole or "0")) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
    fmt: Format
    if suffix in _DECIMAL_SI:
        number *= Fraction(10) ** _DECIMAL_SI[suffix]
        fmt = "DecimalSI"
    elif suffix in _BINARY_SI:
        number *= 2 ** _BINARY_SI[suffix]
        fmt = "BinarySI"
    elif (e := _EXPONENT.fullmatch(suffix)) is not None:
        exp = int(e.group(1))
        if exp > 1000:
            raise QuantityError(f"{shown!r} is too large a quantity (exponent over 1000)")
        if exp < -1000 and number:
            number = _NANO  # what rounding up to a whole nanounit would give, without the huge power
        else:
            number *= Fraction(10) ** exp
        fmt = "DecimalExponent"
    else:  # pragma: no cover - GRAMMAR admits no other suffix
        _explain(text, shown)
    if number and number % _NANO:
        # Rounded up to the next nanounit (0.5n is 1n), as the API server stores it.
        number = Fraction(_round_away(number / _NANO)) * _NANO
    if fmt == "BinarySI" and number > _MAX:
        number = Fraction(_MAX)  # the API server caps binary quantities only
    if fmt == "BinarySI" and number.denominator != 1 and number < 1024:
        fmt = "DecimalSI"
    return Quantity(-number if sign == "-" else number, fmt)


def _explain(text: str, shown: str) -> None:
    """Raise the :class:`QuantityError` that says why ``text`` does not match :data:`GRAMMAR`."""
    m = _NUMBER.fullmatch(text)
    if not text or m is None:
        raise QuantityError(f"{shown!r} is not a Kubernetes quantity; write a number such as 8, 500m or 16Gi")
    _, whole, frac, suffix = m.groups()
    if not whole and not frac:
        raise QuantityError(f"{shown!r} is not a Kubernetes quantity: it has no digits; write e.g. 8, 0.5 or 16Gi")
    raise QuantityError(
        f"{shown!r} is not a Kubernetes quantity: unknown suffix {suffix[:12]!r}; use one of n u m k M G T P E, "
        "Ki Mi Gi Ti Pi Ei, or an exponent such as 1e3")


_parse_cached = functools.lru_cache(maxsize=4096, typed=True)(_parse)


def integer_count(value: object) -> int:
    """A count of an integer resource (``nvidia.com/gpu: "8"``, ``8``, ``"8.0"``, ``"1k"``).

    The API server refuses fractional or negative amounts of extended resources, so this raises
    :class:`QuantityError` for them (and for anything that is not a Kubernetes quantity at all).
    """
    q = parse(value)
    if not q.is_integer:
        raise QuantityError(f"{value!r} is not a whole number; extended resources such as GPUs are counted "
                            "in whole units (write e.g. 8)")
    if q.amount < 0:
        raise QuantityError(f"{value!r} is negative; write a count such as 8")
    return int(q.amount)


def amount_or_zero(value: object) -> Fraction:
    """The amount of a quantity in an object the API server already accepted; absent or unreadable is 0.

    For audits of stored objects (the doctor), where a missing request means none was asked for.
    """
    if value is None:
        return _ZERO
    try:
        return parse(value).amount
    except QuantityError:
        return _ZERO


def same(a: object, b: object) -> bool:
    """True when two quantities are equal in value (``"8.0"`` and ``8``, ``1Gi`` and ``1024Mi``)."""
    try:
        return parse(a) == parse(b)
    except QuantityError:
        return a == b


def canonical(value: object) -> object:
    """The stored form of a quantity; anything that is not one comes back unchanged."""
    try:
        return parse(value).canonical()
    except QuantityError:
        return value
