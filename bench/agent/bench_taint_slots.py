"""What a mass failure costs the API server when agents keep their own taints (agent/taint_slots.py).

Every node of a pool starts failing at once (a typo in the profile, a bad agent image); each node's agent, every
run, takes one of the pool's taint slots before it taints (``TaintSlots.acquire``, exactly the agent's call) until
a slot is free or the run gives up. The bench runs that against kmock's emulator over real HTTP (the same
``ApiServer`` as the agent tests, no RBAC), all agents of a run concurrently, and counts the requests each run
makes by verb, the slots held (never above the budget), and the wall time of a run of every agent.

    PYTHONPATH=src python bench/agent/bench_taint_slots.py --nodes 200 --runs 3

The emulator is single-threaded Python: the wall times say how the agents' requests queue on it, not what a
real API server takes; the request counts are the figures that carry over.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests" / "agent"), str(REPO / "tests")]

from agent_support import ApiServer  # noqa: E402
from kmock import Server  # noqa: E402

from fabricguard.agent import taint_slots as ts  # noqa: E402
from fabricguard.agent.kube import agent_grants, connect  # noqa: E402
from fabricguard.profile import load_profile  # noqa: E402
from kube_support import attributes, kubeconfig  # noqa: E402

NS = "fabricguard-system"


class CountingServer(ApiServer):
    """The agent tests' API server, counting each resource request by verb."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)
        self.counts: collections.Counter[str] = collections.Counter()

    async def _serve_k8s(self, request):  # type: ignore[no-untyped-def]
        a = attributes(str(request.method.value), request.url.path, dict(request.params))
        if a is not None:
            self.counts[f"{a.verb} {a.resource}"] += 1
        return await super()._serve_k8s(request)


async def main(nodes: int, runs: int) -> None:
    profile = load_profile(REPO / "examples" / "profiles" / "gke-a3-ultra.yaml")
    pool = profile.spec.pools[0]
    k8s = CountingServer()
    async with k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "33", "gitVersion": "v1.33.5", "platform": "linux/amd64"}
        with tempfile.TemporaryDirectory() as tmp:
            kube = await connect(kubeconfig(Path(tmp), str(server.url).rstrip("/")), table=agent_grants(True),
                                 namespace=NS)
            now = datetime.now(UTC)
            fv = {"status": {"blastBudget": ts.published(pool, nodes, now)}}
            budget = ts.budget_of(pool, fv, now)
            agents = [ts.TaintSlots(kube, NS, f"node-{i:05d}", 180) for i in range(nodes)]

            async def none(_name: str) -> None:
                return None

            print(f"{nodes} nodes failing at once, {budget.describe()}")
            print("| run | agents asking | slots held after | lists | creates | patches | requests/agent | errors | "
                  "wall s |")
            print("|---|---|---|---|---|---|---|---|---|")
            holding: set[str] = set()
            for run in range(1, runs + 1):
                k8s.counts.clear()
                asking = [a for a in agents if a.node not in holding]
                t0 = time.monotonic()
                got = await asyncio.gather(*(a.acquire(pool, budget, now + timedelta(minutes=run), none)
                                             for a in asking))
                wall = time.monotonic() - t0
                holding |= {a.node for a, g in zip(asking, got, strict=True) if g.slot}
                for a in agents:  # holders renew, as each run does while their taint stands
                    if a.node in holding and a not in asking:
                        await a.renew(now + timedelta(minutes=run))
                assert len(holding) <= budget.slots, (len(holding), budget.slots)
                c = k8s.counts
                total = sum(c.values())
                errors = sum(1 for g in got if g.error)
                print(f"| {run} | {len(asking)} | {len(holding)} | {c['list leases']} | {c['create leases']} | "
                      f"{c['patch leases']} | {total / max(len(asking), 1):.2f} | {errors} | {wall:.2f} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    asyncio.run(main(args.nodes, args.runs))
