"""Fabric types: one module per type, each a complete, frozen :class:`FabricSpec`; this package collects them.

Every part of fabricguard that varies by fabric (the profile's defaults and expected transports, the host
checks, what the webhook injects, how the scanner names a libfabric provider, what the agent mounts, which
device-plugin resources the doctor recognises) reads the spec of the pool's type here instead of keeping its
own table. A new fabric type is one module in this package that defines ``SPEC`` (plus an example profile);
``tests/foundation/test_fabrics.py`` fails when a spec is incomplete or a reader does not answer for it.

The package sits with the vocabulary at the bottom of the floors: it imports nothing of fabricguard but its
own modules, so every floor may read it.
"""

from __future__ import annotations

import importlib
import pkgutil
from enum import StrEnum

from fabricguard.fabrics.spec import VERDICT_ONLY, FabricSpec, HostMount, HostUserspace, Transport

_NOT_TYPES = {"spec"}


def _discover() -> dict[str, FabricSpec]:
    found: dict[str, FabricSpec] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in _NOT_TYPES or info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        spec = getattr(mod, "SPEC", None)
        if not isinstance(spec, FabricSpec):
            raise TypeError(f"fabricguard/fabrics/{info.name}.py defines no SPEC (a FabricSpec)")
        if spec.attribute != info.name:
            raise TypeError(f"fabricguard/fabrics/{info.name}.py: SPEC.type {spec.type!r} does not match the module")
        found[spec.type] = spec
    # Types that run anywhere first, then the platform-bound ones, "none" last (the fallback in every listing).
    return dict(sorted(found.items(), key=lambda kv: (not kv[1].has_fabric, kv[1].platform != "any", kv[0])))


SPECS: dict[str, FabricSpec] = _discover()

# The profile's `fabric.type` values, one member per module (FabricType.gke_rdma == "gke-rdma").
FabricType = StrEnum("FabricType", [(s.attribute, s.type) for s in SPECS.values()])  # type: ignore[misc]


def spec_of(fabric_type: str) -> FabricSpec:
    """The spec of a fabric type (a FabricType or its value); KeyError names the known types."""
    try:
        return SPECS[str(fabric_type)]
    except KeyError:
        raise KeyError(f"unknown fabric type {fabric_type!r}; known: {', '.join(SPECS)}") from None


def wire_transports() -> frozenset[Transport]:
    """Every transport some fabric carries traffic over (sockets are no fabric's: the "none" type accepts them)."""
    return frozenset(t for s in SPECS.values() if s.has_fabric for t in s.transports) - VERDICT_ONLY


def gpudirect_transports() -> frozenset[Transport]:
    """Transports of fabrics where GPUDirect RDMA applies (a host-staged job on them is warned)."""
    return frozenset(t for s in SPECS.values() if s.gpudirect for t in s.transports) - VERDICT_ONLY


def provider_transport(providers: set[str]) -> Transport | None:
    """The transport libfabric providers prove: every provider belongs to one fabric's list (efa, cxi)."""
    provs = {p.lower() for p in providers}
    if not provs:
        return None
    for s in SPECS.values():
        if s.libfabric_providers and provs <= set(s.libfabric_providers):
            (t,) = s.transports
            return t
    return None


def libfabric_providers() -> frozenset[str]:
    """Every libfabric provider that proves some fabric carried the traffic."""
    return frozenset(p for s in SPECS.values() for p in s.libfabric_providers)


def device_plugin_prefixes() -> tuple[str, ...]:
    """Extended-resource prefixes some fabric's device plugin advertises, each once."""
    return tuple(dict.fromkeys(p for s in SPECS.values() for p in s.device_plugin_prefixes))


def lib_dirs() -> tuple[str, ...]:
    """Where every fabric's userspace lives below a node root, each once."""
    return tuple(dict.fromkeys(d for s in SPECS.values() for d in s.lib_dirs))


__all__ = [
    "SPECS",
    "VERDICT_ONLY",
    "FabricSpec",
    "FabricType",
    "HostMount",
    "HostUserspace",
    "Transport",
    "device_plugin_prefixes",
    "gpudirect_transports",
    "lib_dirs",
    "libfabric_providers",
    "provider_transport",
    "spec_of",
    "wire_transports",
]
