"""CPU per mutating decision, this tree against another (``--other-src``), on every review fixture.

Issue 31 item 6: the webhook notes its patch operations as it makes its changes (``patching.Recorder``) instead of
copying the object and diffing the copy afterwards. Each side runs ``Admission.handle("mutate", body)`` in a child
process of its own (``PYTHONPATH`` set to its ``src``), interleaved ``--repeat`` times; each run times ``--n``
calls per review with ``time.process_time`` and the minimum per call is kept. The fixtures are
``tests/admission/fixtures/*.json`` under the GKE A3 Ultra profile, plus the JobSet with 200 more copies of its
workers job (the fan-out shape of ``bench_webhook.py``). Both sides must give the same patched object.

    git archive <commit> src | tar -x -C /tmp/old
    .venv/bin/python bench/admission/bench_patch.py --other-src /tmp/old/src --n 300 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import base64, json, sys, time
from pathlib import Path
import jsonpatch
from fabricguard.admission.decide import Admission
from fabricguard.profile import load_profile
root, n = Path(sys.argv[1]), int(sys.argv[2])
adm = Admission(load_profile(root / "examples" / "profiles" / "gke-a3-ultra.yaml"))
bodies = {p.stem: p.read_bytes() for p in sorted((root / "tests" / "admission" / "fixtures").glob("*.json"))}
review = json.loads(bodies["jobset"])
jobs = review["request"]["object"]["spec"]["replicatedJobs"]
workers = next(j for j in jobs if "worker" in j["name"])
for i in range(200):
    jobs.append({**json.loads(json.dumps(workers)), "name": f"workers-{i}"})
bodies["jobset+200 jobs"] = json.dumps(review).encode()
out = {}
for name, body in bodies.items():
    d = adm.handle("mutate", body)
    patch = d.body.get("response", {}).get("patch")
    ops = json.loads(base64.b64decode(patch)) if patch else []
    obj = json.loads(body)["request"]["object"]
    patched = jsonpatch.apply_patch(obj, ops) if ops else obj
    k = max(3, n * 3000 // len(body))
    t = time.process_time()
    for _ in range(k):
        adm.handle("mutate", body)
    out[name] = {"us": (time.process_time() - t) / k * 1e6, "ops": len(ops), "bytes": len(body),
                 "patched": json.dumps(patched, sort_keys=True)}
print(json.dumps(out))
"""


def run(src: Path, n: int) -> dict[str, dict[str, object]]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    r = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(n)], env=env, check=True, capture_output=True,
                       text=True)
    return dict(json.loads(r.stdout))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other-src", type=Path, required=True, help="the src/ of the tree to compare against")
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    mine, other = [], []
    for _ in range(a.repeat):
        mine.append(run(ROOT / "src", a.n))
        other.append(run(a.other_src, a.n))
    print(f"load average {os.getloadavg()[0]:.1f}; min CPU per decision over {a.repeat} interleaved runs")
    print(f"{'review':18s} {'bytes':>8s} {'ops':>4s} {'other us':>9s} {'this us':>8s} {'change':>7s}")
    for name in mine[0]:
        o = min(float(str(r[name]["us"])) for r in other)
        m = min(float(str(r[name]["us"])) for r in mine)
        same = mine[0][name]["patched"] == other[0][name]["patched"]
        print(f"{name:18s} {int(str(mine[0][name]['bytes'])):8,d} {mine[0][name]['ops']!s:>4s} {o:9.0f} {m:8.0f} "
              f"{(m - o) / o:+7.0%}{'' if same else '  PATCHED OBJECTS DIFFER'}")


if __name__ == "__main__":
    main()
