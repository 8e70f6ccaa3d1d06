"""Write a large snapshot for the doctor benchmark: 5,000 nodes and 60,000 pods (default), kubectl shape.

    python bench/doctor/gen_snapshot.py bench/out/doctor-5k   # bench/out is gitignored

Nodes split into an arm64 GH200 fabric pool (half of them without the RDMA resource, the incident) and
system nodes; every fabric node runs a crash-looping device plugin pod, and the rest of the pods are
GPU training workers in two-node JobSets, some without fabric resources, plus system pods.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from datetime import timedelta
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "fg_example_snapshots", Path(__file__).resolve().parents[2] / "examples" / "snapshots" / "generate.py"
)
assert _spec and _spec.loader
gen = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = gen
_spec.loader.exec_module(gen)


def build(nodes: int, pods: int) -> dict[str, dict]:
    NOW = gen.NOW
    fabric = int(nodes * 0.8)
    node_items, pod_items = [], []
    ds = gen.daemonset(
        gen.PLUGIN_NS,
        gen.PLUGIN,
        image=f"{gen.MIRROR}:v1.5.2",
        created=NOW - timedelta(days=271),
        node_selector=gen.GH200,
        desired=fabric,
        ready=0,
        generation=2,
    )
    for i in range(nodes):
        created = NOW - timedelta(minutes=7 * i + 5)
        if i < fabric:
            name = f"gh200-{i:05d}"
            block = ("block-a", "block-b", "block-c")[i % 3]
            alloc = {gen.RDMA: "63"} if i % 2 else {}
            node_items.append(
                gen.node(
                    name,
                    arch="arm64",
                    labels={**gen.GH200, "network.example.com/block": block},
                    created=created,
                    allocatable=alloc,
                )
            )
            pod_items.append(gen.ds_pod(ds, name, created, crashing=True, restarts=i % 50))
        else:
            node_items.append(
                gen.node(
                    f"system-{i:05d}",
                    arch="amd64",
                    labels={"node-role.example.com/system": "true"},
                    created=created,
                    allocatable={},
                    gpus=0,
                )
            )
    worker_nodes = [n["metadata"]["name"] for n in node_items[:fabric]]
    j = 0
    while len(pod_items) < pods:
        res = {"nvidia.com/gpu": "1"} if j % 4 == 0 else {"nvidia.com/gpu": "1", gen.RDMA: "1"}
        for idx in range(2):
            if len(pod_items) >= pods:
                break
            node_name = worker_nodes[(2 * j + idx) % len(worker_nodes)]
            pod_items.append(
                gen.training_pod(
                    f"team-{j % 40}",
                    f"job-{j:05d}",
                    idx,
                    node_name,
                    NOW - timedelta(hours=1 + j % 48),
                    resources=res,
                    image="registry.corp.example.com/ml/trainer:2025.09",
                )
            )
        j += 1
    return {"nodes": gen.klist(node_items), "pods": gen.klist(pod_items), "daemonsets": gen.klist([ds])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", type=Path)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=60000)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    for key, lst in build(a.nodes, a.pods).items():
        # kubectl writes indented JSON; so do we, so that json.load has the real amount of text to parse.
        (a.out / f"{key}.json").write_text(json.dumps(lst, indent=4) + "\n", encoding="utf-8")
    (a.out / "profile.yaml").write_text(gen.INCIDENT_PROFILE.format(name="bench", env="production"), encoding="utf-8")
    print(f"wrote {a.nodes} nodes, {a.pods} pods to {a.out}")


if __name__ == "__main__":
    main()
