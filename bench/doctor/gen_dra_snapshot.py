"""Write a large DRANET snapshot for the doctor benchmark: N nodes, one ResourceSlice each, two-node JobSets.

Built from the example builders (examples/snapshots/generate_dra.py): every node of pool b200-dranet offers eight
RDMA NICs through DRANET; one JobSet per two nodes holds all of them through its pods' ResourceClaims, except one
in eight JobSets whose pods hold no claim (``fabric-request-missing``) and one in sixteen nodes whose slice is gone
(``dra-no-resourceslice``).

    python bench/doctor/gen_dra_snapshot.py bench/out/doctor-dra-4k --nodes 4000
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import sys
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _gen():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_dra", ROOT / "examples" / "snapshots" / "generate_dra.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_dra"] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--nodes", type=int, default=4000)
    a = ap.parse_args()
    g = _gen()
    base = g.dranet_healthy()
    created = g.NOW - timedelta(days=40)
    ds = base["daemonsets"]["items"][0]
    nodes, pods, slices, claims = [], [], [], []
    for n in range(a.nodes):
        name = f"gke-a4-dranet-1-{n:05d}"
        nodes.append(g.gke_node(name, arch="amd64", gpus=8, labels=g.GKE_LABELS, created=created, allocatable={},
                            fabric_ready=True))
        pods.append(g.ds_pod(ds, name, created, crashing=False))
        if n % 16 != 15:
            slices.append(g.resource_slice(name, "dra.net", g.gke_nics(n % 256, held=set(range(8))), created))
        job = f"job-{n // 2:05d}"
        pod = g.training_pod("ml-search", job, n % 2, name, g.NOW - timedelta(hours=3),
                             resources={"nvidia.com/gpu": "8"}, image="us-docker.pkg.dev/ml/trainer:2026.11")
        if (n // 2) % 8 == 7:
            pods.append(pod)
            continue
        claim_name = f"{pod['metadata']['name']}-fabric-{hashlib.sha1(name.encode()).hexdigest()[:5]}"
        pods.append(g.with_claim(pod, claim_name, g.GKE_TEMPLATE))
        claims.append(g.allocated_claim("ml-search", claim_name, pod, g.GKE_TEMPLATE, "mrdma.google.com", "dra.net",
                                        name, [f"gpu{k}rdma0" for k in range(8)], g.NOW - timedelta(hours=3)))
    ds["status"] |= {"desiredNumberScheduled": a.nodes, "numberReady": a.nodes, "numberAvailable": a.nodes,
                     "currentNumberScheduled": a.nodes, "updatedNumberScheduled": a.nodes}
    lists = dict(base) | {"nodes": g.klist(nodes), "pods": g.klist(pods), "resourceslices": g.klist(slices),
                          "resourceclaims": g.klist(claims)}
    g.write(a.out, lists, (ROOT / "examples" / "profiles" / "gke-a4-dranet.yaml").read_text(encoding="utf-8"))
    print(f"{a.out}: {a.nodes} nodes, {len(slices)} ResourceSlices, {len(claims)} ResourceClaims, {len(pods)} pods")


if __name__ == "__main__":
    main()
