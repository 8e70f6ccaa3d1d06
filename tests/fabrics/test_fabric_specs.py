"""Every fabric type is one complete module, and every reader that varies by fabric answers for every type.

A new ``fabricguard/fabrics/<type>.py`` that leaves a question unanswered, or a reader that keeps its own table
and misses a type, fails here instead of as a KeyError at admission or a silent "not RDMA" on a node.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from pathlib import Path

import pytest
import yaml

from fabricguard import fabrics
from fabricguard.admission import mutate, runtime
from fabricguard.agent import render as agent_render
from fabricguard.doctor.rules import dra as dra_rules
from fabricguard.fabrics import SPECS, FabricSpec, FabricType, Transport
from fabricguard.nccl import commands as nccl_commands
from fabricguard.probes import host
from fabricguard.profile import DEFAULT_NCCL_NET, EXPECTED_TRANSPORTS, load_profile, loads_profile

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "profiles"
ALL = sorted(SPECS)


def test_each_module_is_one_type_and_every_type_has_a_module() -> None:
    mods = {m.name for m in pkgutil.iter_modules(fabrics.__path__)} - {"spec"}
    assert mods == {s.attribute for s in SPECS.values()}
    assert {t.value for t in FabricType} == set(SPECS)
    for name in mods:
        assert importlib.import_module(f"fabricguard.fabrics.{name}").__doc__, f"fabrics/{name}.py has no docstring"


def test_a_spec_has_no_defaults_to_forget() -> None:
    # Every field is required: a new type answers every question or does not import.
    for f in dataclasses.fields(FabricSpec):
        assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, f.name


@pytest.mark.parametrize("t", ALL)
def test_spec_is_complete_and_consistent(t: str) -> None:
    s = SPECS[t]
    assert s.summary.strip() and s.image_needs.strip()
    assert s.transports, f"{t}: no transport a job on it may report"
    if not s.has_fabric:
        assert s.transports <= fabrics.VERDICT_ONLY | {Transport.socket}
        assert not (s.kernel_modules or s.net_plugin_globs or s.device_plugin_prefixes or s.libfabric_providers)
        return
    wire = s.transports - fabrics.VERDICT_ONLY
    assert wire and Transport.socket not in wire, f"{t}: a fabric never accepts sockets"
    # a fabric the node agent cannot see is a fabric it can never refuse
    assert s.device_class is not None or s.host_userspace is not None or s.net_plugin_globs, t
    if s.rdma_verbs:
        assert s.device_class == "infiniband" and "ib_core" in dict(s.kernel_modules), t
    if s.link_layer is not None or s.netdevs_required:
        assert s.rdma_verbs, f"{t}: link layer and netdevs are verbs-port checks"
    if s.nccl_net == "Libfabric":
        # aws-ofi-nccl carries any provider, tcp among them: only the provider proves the fabric
        assert s.libfabric_providers and len(wire) == 1, t
        assert s.net_plugin_globs, f"{t}: the plugin library is what the node must carry"
    if s.libfabric_providers:
        assert fabrics.provider_transport(set(s.libfabric_providers)) in wire
    assert s.device_plugin_prefixes or not s.needs_resources, f"{t}: requests resources no plugin offers"
    for mod, why in s.kernel_modules:
        assert mod and why and "-" not in mod, f"{t}: /proc/modules spells {mod!r} with underscores"


@pytest.mark.parametrize("t", ALL)
def test_every_reader_answers_for_every_type(t: str, tmp_path: Path) -> None:
    s = SPECS[t]
    ft = FabricType(t)
    assert DEFAULT_NCCL_NET[ft] == s.nccl_net and EXPECTED_TRANSPORTS[ft] == s.transports
    assert runtime.IMAGE_NEEDS[t] == s.image_needs
    for tr in s.transports:
        assert tr in nccl_commands._STYLE, f"nccl inspect has no colour for {tr}"
    if s.has_fabric:
        assert set(s.device_plugin_prefixes) <= set(dra_rules.DEVICE_PLUGIN_FABRIC_PREFIXES)
        assert set(s.lib_dirs) <= set(host.LIB_DIRS)
    pool = _pool(t)
    assert pool.fabric.spec is s
    assert mutate.socket_ifname(t, None) == (None if not s.socket_ifname_exclude else
                                             "^lo,docker," + ",".join(s.socket_ifname_exclude))
    extras = runtime.fabric_userspace(pool)
    assert extras.empty == (s.host_userspace is None or not s.has_fabric)
    assert agent_render._host_dirs(pool)[-len(s.host_dirs) or None:] == list(s.host_dirs) or not s.host_dirs
    assert agent_render.nvml_privileged(pool, "auto") == (s.driver_without_toolkit is not None)
    # the host checks run on an empty node root: a fabric pool is refused, never passed or a KeyError
    checks = host.rdma_checks(pool, tmp_path) + host.module_checks(None, pool, tmp_path) + \
        host.library_checks(pool, tmp_path)
    if s.has_fabric:
        assert any(c.status.value == "failed" for c in checks), [(c.name, c.status) for c in checks]
    else:
        assert all(c.status.value == "skipped" for c in checks)


@pytest.mark.parametrize("t", [t for t in ALL if SPECS[t].has_fabric])
def test_every_fabric_type_has_an_example_profile(t: str) -> None:
    used = {p.fabric.type for f in EXAMPLES.glob("*.yaml") for p in load_profile(f).spec.pools}
    assert t in used, f"add examples/profiles/<platform>.yaml with a pool of fabric type {t}"


def test_a_module_without_spec_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "fakefabrics"
    pkg.mkdir()
    (pkg / "broken.py").write_text('"""No SPEC."""\n')
    monkeypatch.setattr(fabrics, "__path__", [str(pkg)])
    monkeypatch.setattr(fabrics, "__name__", "fakefabrics")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TypeError, match=r"broken\.py defines no SPEC"):
        fabrics._discover()


def test_sockets_are_no_fabrics_wire() -> None:
    wire = fabrics.wire_transports()
    assert Transport.socket not in wire and not (wire & fabrics.VERDICT_ONLY)
    assert {Transport.ib, Transport.roce, Transport.efa, Transport.cxi, Transport.tcpx} == wire
    assert fabrics.gpudirect_transports() == {Transport.ib, Transport.roce, Transport.efa, Transport.cxi}


def test_unknown_type_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="slingshot"):
        fabrics.spec_of("omnipath")


def _pool(t: str):  # type: ignore[no-untyped-def]
    s = SPECS[t]
    fabric: dict[str, object] = {"type": t}
    if s.needs_resources:
        fabric["resources"] = {(s.device_plugin_prefixes[0].rstrip("/") + ("/x" if
                                s.device_plugin_prefixes[0].endswith("/") else "")): 1}
    doc = {"apiVersion": "fabricguard.io/v1alpha1", "kind": "PlatformProfile", "metadata": {"name": "t"},
           "spec": {"pools": [{"name": "p", "nodeSelector": {"k": "v"}, "gpusPerNode": 8, "fabric": fabric}]}}
    return loads_profile(yaml.safe_dump(doc)).spec.pools[0]
