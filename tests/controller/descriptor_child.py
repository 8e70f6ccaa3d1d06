"""Run as a child process under a soft RLIMIT_NOFILE of 1,024 (what containerd 2.x gives a container).

One running job of 1,100 ranks is followed (its socket line is in the last rank's file) while nine finished jobs
of other tenants are judged, before and after; prints the figures as JSON for the test to compare."""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
from pathlib import Path

from controller_support import PROFILE, ROCE_LOGS, SOCKET_LOGS

from fabricguard import descriptors
from fabricguard.controller.canary import log_dir
from fabricguard.controller.live import LiveJobs, running_jobs
from fabricguard.controller.lustre import read_job
from fabricguard.profile import loads_profile

NS, POOL = "ml-training", "gh200-roce"


def jobset(name: str, finished: bool = False) -> dict:
    conds = [{"type": "Completed", "status": "True"}] if finished else []
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                         "labels": {"fabricguard.io/managed": "true", "fabricguard.io/pool": POOL}},
            "spec": {"replicatedJobs": []}, "status": {"conditions": conds}}


def main() -> None:
    soft = int(sys.argv[2])
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    root = Path(sys.argv[1])
    prof = loads_profile(PROFILE)
    pool = prof.pool(POOL)
    others = [f"tenant-{i}" for i in range(9)]
    for name in others:
        d = root / log_dir(prof, NS, name)
        d.mkdir(parents=True)
        for p in ROCE_LOGS:
            shutil.copy(p, d / p.name)
    big = root / log_dir(prof, NS, "big")
    big.mkdir(parents=True)
    healthy = ROCE_LOGS[0].read_bytes()
    for r in range(1099):
        (big / f"rank{r:04d}.log").write_bytes(healthy)
    (big / "rank1099.log").write_bytes(SOCKET_LOGS[0].read_bytes())

    def judge() -> dict[str, str]:
        out = {}
        for name in others:
            jf = read_job(prof, pool, NS, name, root)
            out[name] = jf.verdict.verdict.value if jf.verdict is not None else f"error: {jf.error}"
        return out

    before = judge()
    lj = LiveJobs(prof, root)
    lj.sync(running_jobs(prof, {"JobSet": [jobset("big")]}))
    (ob,) = lj.poll()
    held = descriptors.open_count()
    during = judge()
    for r in range(1100):  # every rank writes more; the next poll reads all of it
        with (big / f"rank{r:04d}.log").open("ab") as f:
            f.write(b"step\n")
    (ob2,) = lj.poll()
    after = judge()
    print(json.dumps({"before": before, "during": during, "after": after, "held": held,
                      "transport": ob.verdict.transport.value, "unread": [e.why for e in ob.verdict.report.unread],
                      "files": len(ob2.verdict.report.files), "bytes": lj.cost.bytes_total,
                      "size": sum(os.path.getsize(p) for p in big.iterdir()),
                      "soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}))


if __name__ == "__main__":
    main()
