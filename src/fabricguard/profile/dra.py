"""How a node offers, and a pod holds, a fabric through Dynamic Resource Allocation (``resource.k8s.io/v1``).

Pure reading of objects as the API server stores them, shared by the agent (its own node) and the doctor
(every node of a snapshot):

- a ResourceSlice (``spec.driver``, ``spec.nodeName``, ``spec.pool``, ``spec.devices[{name, attributes}]``) lists
  a node's devices; an attribute is a one-key map (``{"bool": true}``, ``{"string": "up"}``, ``{"int": 0}``,
  ``{"version": "1.0.0"}``);
- a device is one of the pool's fabric devices when it carries every ``dra.expected_attributes``; for the dra.net
  driver it is usable when ``dra.net/state`` is ``up``, or when a ResourceClaim holds it (DRANET moves an allocated
  NIC into the pod and drops its interface attributes from the slice);
- a pod requested the fabric when a container requests the extended resource, when one of its ResourceClaims asks
  for the fabric's DeviceClass, or when ``status.extendedResourceClaimStatus`` shows the scheduler's KEP-5004 claim;
- GPUs the NVIDIA DRA driver offers (driver ``gpu.nvidia.com``, as GPU Operator's ``GPUCluster`` mode runs it:
  then never in allocatable) are its devices with attribute ``type`` ``gpu`` (MIG devices say ``mig``); a device
  carrying a ``NoSchedule``/``NoExecute`` device taint (the driver publishes GPU health so) is not usable.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fabricguard.profile.model import DRANET_DRIVER, Dra, Pool

RESOURCE_SLICE = "ResourceSlice"
RESOURCE_CLAIM = "ResourceClaim"
RESOURCE_CLAIM_TEMPLATE = "ResourceClaimTemplate"
DEVICE_CLASS = "DeviceClass"
STATE_ATTRIBUTE = f"{DRANET_DRIVER}/state"


def _m(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def attribute(device: dict[str, Any], name: str) -> Any:
    """The value of one device attribute (``{"bool": true}`` is True); None when absent."""
    raw = _m(device.get("attributes")).get(name)
    if not isinstance(raw, dict):
        return None
    for key in ("bool", "string", "int", "version"):
        if key in raw:
            return raw[key]
    return None


def node_slices(slices: Iterable[dict[str, Any]], node: str, driver: str) -> list[dict[str, Any]]:
    """The ResourceSlices ``driver`` publishes for ``node``."""
    return [s for s in slices
            if _m(s.get("spec")).get("nodeName") == node and _m(s.get("spec")).get("driver") == driver]


def allocated(claims: Iterable[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(driver, pool, device) of every device some ResourceClaim holds."""
    out: set[tuple[str, str, str]] = set()
    for c in claims:
        alloc = _m(_m(c.get("status")).get("allocation"))
        for r in _l(_m(alloc.get("devices")).get("results")):
            if isinstance(r, dict):
                out.add((str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", ""))))
    return out


@dataclass
class Offer:
    """What a node's ResourceSlices say about the pool's fabric."""

    slices: int = 0
    listed: int = 0
    matching: int = 0
    usable: int = 0
    wanted: int = 1
    down: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.usable >= self.wanted

    def describe(self, dra: Dra, node: str) -> str:
        if not self.slices:
            return f"no ResourceSlice from driver {dra.driver} for node {node}"
        attrs = ", ".join(f"{k}={v}" for k, v in dra.expected_attributes.items()) or "any attributes"
        text = (f"{self.slices} ResourceSlice(s) from {dra.driver} list {self.listed} device(s), {self.matching} "
                f"with {attrs}, {self.usable} usable (pods need {self.wanted})")
        if self.down:
            text += f"; not up: {', '.join(self.down[:8])}"
        return text


GPU_DRIVER = "gpu.nvidia.com"
UNUSABLE_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass
class GpuOffer:
    """Whole GPUs a node's ``gpu.nvidia.com`` ResourceSlices list, and those a device taint keeps from use."""

    slices: int = 0
    gpus: int = 0
    usable: int = 0
    tainted: list[str] = field(default_factory=list)

    def describe(self, node: str) -> str:
        if not self.slices:
            return f"no ResourceSlice from {GPU_DRIVER} for node {node}"
        text = f"{self.slices} ResourceSlice(s) from {GPU_DRIVER} list {self.gpus} GPU(s), {self.usable} usable"
        if self.tainted:
            text += f"; device-tainted: {', '.join(self.tainted[:8])}"
        return text


def gpu_offer(node: str, slices: Iterable[dict[str, Any]]) -> GpuOffer:
    """The whole GPUs the NVIDIA DRA driver offers on ``node`` (devices of ``type`` gpu; a device taint with a
    NoSchedule or NoExecute effect makes one unusable)."""
    offer = GpuOffer()
    for s in node_slices(slices, node, GPU_DRIVER):
        offer.slices += 1
        for dev in _l(_m(s.get("spec")).get("devices")):
            if not isinstance(dev, dict):
                continue
            kind = attribute(dev, "type") or attribute(dev, f"{GPU_DRIVER}/type")
            if kind != "gpu":
                continue
            offer.gpus += 1
            taints = [t for t in _l(dev.get("taints")) if isinstance(t, dict) and t.get("effect") in UNUSABLE_EFFECTS]
            if taints:
                offer.tainted.append(f"{dev.get('name', '?')} ({taints[0].get('key', '?')})")
            else:
                offer.usable += 1
    return offer


def wanted_devices(pool: Pool) -> int:
    """Fabric devices one node must offer: the per-node or per-pod count (a whole-node pod), at least one."""
    n = pool.fabric.dra_count
    return max(n or 1, 1)


@dataclass
class SliceIndex:
    """ResourceSlices by (node, driver) and the devices claims hold, built once for many nodes."""

    by_node: dict[tuple[str, str], list[dict[str, Any]]]
    held: set[tuple[str, str, str]]

    @classmethod
    def build(cls, slices: Iterable[dict[str, Any]], claims: Iterable[dict[str, Any]] = ()) -> SliceIndex:
        by: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for s in slices:
            spec = _m(s.get("spec"))
            by.setdefault((str(spec.get("nodeName", "")), str(spec.get("driver", ""))), []).append(s)
        return cls(by, allocated(claims))

    def slices(self, node: str, driver: str) -> list[dict[str, Any]]:
        return self.by_node.get((node, driver), [])


def node_offer(pool: Pool, node: str, slices: Iterable[dict[str, Any]] | SliceIndex,
               claims: Iterable[dict[str, Any]] = ()) -> Offer:
    """Count the pool's fabric devices on ``node`` in the driver's ResourceSlices (``slices`` may be an index
    built once, for a pass over many nodes; ``claims`` are then ignored)."""
    d = pool.fabric.dra
    assert d is not None
    index = slices if isinstance(slices, SliceIndex) else SliceIndex.build(slices, claims)
    mine = index.slices(node, d.driver)
    held = index.held
    offer = Offer(slices=len(mine), wanted=wanted_devices(pool))
    expected = d.expected_attributes
    for s in mine:
        spec = _m(s.get("spec"))
        pool_name = str(_m(spec.get("pool")).get("name", ""))
        for dev in _l(spec.get("devices")):
            if not isinstance(dev, dict):
                continue
            offer.listed += 1
            if any(attribute(dev, k) != v for k, v in expected.items()):
                continue
            offer.matching += 1
            name = str(dev.get("name", ""))
            state = attribute(dev, STATE_ATTRIBUTE) if d.driver == DRANET_DRIVER else None
            if (d.driver, pool_name, name) in held or state in (None, "up"):
                offer.usable += 1
            else:
                offer.down.append(f"{name} ({STATE_ATTRIBUTE}={state})")
    return offer


def claim_classes(claim: dict[str, Any]) -> set[str]:
    """DeviceClasses a ResourceClaim (or a template's ``spec.spec``) asks for."""
    spec = _m(claim.get("spec"))
    if "devices" not in spec and isinstance(spec.get("spec"), dict):
        spec = spec["spec"]  # a ResourceClaimTemplate
    out: set[str] = set()
    for r in _l(_m(spec.get("devices")).get("requests")):
        if not isinstance(r, dict):
            continue
        exactly = _m(r.get("exactly"))
        if exactly.get("deviceClassName"):
            out.add(str(exactly["deviceClassName"]))
        for sub in _l(r.get("firstAvailable")):
            if isinstance(sub, dict) and sub.get("deviceClassName"):
                out.add(str(sub["deviceClassName"]))
    return out


def pod_claims(pod: dict[str, Any], claims: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """The ResourceClaims a pod holds (``status.resourceClaimStatuses`` for template claims, or direct names)."""
    meta, spec, status = _m(pod.get("metadata")), _m(pod.get("spec")), _m(pod.get("status"))
    ns = str(meta.get("namespace", ""))
    names = {str(s.get("resourceClaimName")) for s in _l(status.get("resourceClaimStatuses"))
             if isinstance(s, dict) and s.get("resourceClaimName")}
    names |= {str(r.get("resourceClaimName")) for r in _l(spec.get("resourceClaims"))
              if isinstance(r, dict) and r.get("resourceClaimName")}
    ext = _m(status.get("extendedResourceClaimStatus")).get("resourceClaimName")
    if ext:
        names.add(str(ext))
    return [claims[(ns, n)] for n in sorted(names) if (ns, n) in claims]


def holds_fabric_claim(pod: dict[str, Any], pool: Pool, claims: dict[tuple[str, str], dict[str, Any]]) -> bool:
    """The pod holds a claim of the fabric's DeviceClass, or the scheduler's KEP-5004 claim for its resource."""
    d = pool.fabric.dra
    if d is None:
        return False
    status = _m(pod.get("status"))
    ext = _m(status.get("extendedResourceClaimStatus"))
    if ext and d.extendedResourceName and any(
            isinstance(m, dict) and m.get("resourceName") == d.extendedResourceName
            for m in _l(ext.get("requestMappings"))):
        return True
    return any(d.deviceClassName in claim_classes(c) for c in pod_claims(pod, claims))


def claims_by_name(claims: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(str(_m(c.get("metadata")).get("namespace", "")), str(_m(c.get("metadata")).get("name", ""))): c
            for c in claims}
