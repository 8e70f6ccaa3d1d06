"""What the tests that talk to kmock's Kubernetes emulator share: a kubeconfig for it, and the example snapshots'
generator (examples/snapshots/generate.py) loaded once as a module."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
# Where kmock's emulator keeps each kind the example snapshots hold (group/version/plural).
RESOURCE = {
    "Node": "v1/nodes",
    "Pod": "v1/pods",
    "Event": "v1/events",
    "DaemonSet": "apps/v1/daemonsets",
    "ControllerRevision": "apps/v1/controllerrevisions",
    "ConfigMap": "v1/configmaps",
    "NetworkAttachmentDefinition": "k8s.cni.cncf.io/v1/network-attachment-definitions",
}


def kubeconfig(tmp_path: Path, url: str, token: str = "t", *, name: str = "kubeconfig") -> str:
    """A kubeconfig file for a cluster at ``url`` with a bearer ``token``; returns its path."""
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kmock", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "u"}}],
        "current-context": "kmock",
    }
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return str(path)


def _load_generate() -> ModuleType:
    name = "fg_example_snapshots"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / "snapshots" / "generate.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


gen = _load_generate()
