"""Regenerate the example job directories that ``verify-job`` and the README demonstrate.

Two 2-node H200 jobs on the GKE A3 Ultra profile, after the field report: one on the RDMA fabric with
Lustre (median step ~6.07 s), one that silently fell back to TCP sockets and wrote checkpoints to the
container's overlay (median step ~12.36 s). Run from the repository root:
``.venv/bin/python examples/jobs/regenerate.py``.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from nccl_logs import GIB, SOCKET, Job, write_interleaved  # noqa: E402

OUT = Path(__file__).resolve().parent

LUSTRE_MOUNTINFO = """\
1650 1480 0:312 / / rw,relatime master:420 - overlay overlay rw,lowerdir=/var/lib/containerd/l/1,upperdir=/u,workdir=/w
1651 1650 0:315 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
1652 1650 0:316 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
1660 1650 0:88 /ml-search/{job}/ /mnt/lustre rw,relatime - lustre 172.16.0.5@tcp:/lfsprod rw,flock,lazystatfs
1661 1650 0:317 / /dev/shm rw,nosuid,nodev - tmpfs shm rw,size=262144000k
"""
# The PVC was never mounted: /mnt/lustre is a plain directory in the container's writable layer.
OVERLAY_MOUNTINFO = """\
1650 1480 0:312 / / rw,relatime master:420 - overlay overlay rw,lowerdir=/var/lib/containerd/l/1,upperdir=/u,workdir=/w
1651 1650 0:315 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
1652 1650 0:316 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
1661 1650 0:317 / /dev/shm rw,nosuid,nodev - tmpfs shm rw,size=65536k
"""


def steps(median: float, n: int = 40) -> str:
    # Deterministic jitter around the median; the first step carries compilation and warm-up.
    lines = []
    for i in range(n):
        jitter = ((i * 37) % 11 - 5) / 100 * median * 0.2
        sec = median * 3.1 if i == 0 else median + jitter
        lines.append(json.dumps({"step": i, "seconds": round(sec, 3), "loss": round(2.5 - i * 0.01, 4)}))
    return "\n".join(lines) + "\n"


def write(name: str, job: Job, mountinfo: str, median: float) -> None:
    d = OUT / name
    if d.exists():
        shutil.rmtree(d)
    for node in range(job.nodes):
        write_interleaved(job, d / "logs", node, timestamps=True)
        (d / f"mountinfo-worker-{node}").write_text(mountinfo.format(job=name))
    (d / "steps.jsonl").write_text(steps(median))


def main() -> None:
    write("rdma-healthy", Job(nodes=2, gpus_per_node=8, fabric=GIB, version="2.27.7+cuda12.9"), LUSTRE_MOUNTINFO, 6.07)
    write(
        "socket-fallback",
        Job(nodes=2, gpus_per_node=8, fabric=SOCKET, version="2.27.7+cuda12.9", ib_disabled_env=True),
        OVERLAY_MOUNTINFO,
        12.36,
    )


if __name__ == "__main__":
    main()
