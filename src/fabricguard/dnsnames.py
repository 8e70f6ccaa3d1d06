"""Kubernetes names, one grammar each: the RFC 1123 label, the DNS subdomain and the label value.

``apimachinery/pkg/util/validation``: a DNS label (namespaces, most object names fabricguard derives) is at most
63 lowercase letters, digits and '-', starting and ending with a letter or digit; a DNS subdomain (CRD-backed
object names, DeviceClasses, drivers) is dot-separated labels, at most 253 characters; a label value is at most
63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit (or empty).
Every check of a name reads this module; a name written into a label (a pool's ``fabricguard.io/pool``) is
checked as a label value too.
"""

from __future__ import annotations

import re

LABEL_MAX = 63
SUBDOMAIN_MAX = 253
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def is_label(value: str) -> bool:
    """An RFC 1123 label: at most 63 of [a-z0-9-], alphanumeric at both ends."""
    return len(value) <= LABEL_MAX and bool(_LABEL.match(value))


def is_subdomain(value: str) -> bool:
    """An RFC 1123 subdomain: dot-separated labels, at most 253 characters."""
    return len(value) <= SUBDOMAIN_MAX and bool(_SUBDOMAIN.match(value))


def is_label_value(value: str) -> bool:
    """A label value: empty, or at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends."""
    return len(value) <= LABEL_MAX and bool(_LABEL_VALUE.match(value))


def label_problem(value: str, what: str) -> str | None:
    """Why ``value`` cannot be ``what`` (an RFC 1123 label), or None."""
    if is_label(value):
        return None
    if len(value) > LABEL_MAX and _LABEL.match(value):
        return f"{value!r} is {len(value)} characters; a {what} is at most {LABEL_MAX} (RFC 1123 label)"
    return (f"{value!r} is not a valid {what}: at most {LABEL_MAX} lowercase letters, digits and '-', starting "
            "and ending with a letter or digit (RFC 1123 label)")


def subdomain_problem(value: str, what: str) -> str | None:
    if is_subdomain(value):
        return None
    return (f"{value!r} is not a valid {what}: a DNS subdomain (lowercase letters, digits, '-' and '.', at most "
            f"{SUBDOMAIN_MAX} characters)")
