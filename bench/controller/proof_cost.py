"""GPU-hour cost of the node-proof coverage goal at fleet scale, from the controller's own decisions.

    .venv/bin/python bench/controller/proof_cost.py [--nodes 1000] [--gpus 8] [--blocks 16] [--every 24h]
        [--budget 0.5%] [--run-minutes 3,5,10] [--pair-duration 10m] [--max-concurrent 32] [--bad 3] [--days 2]

A simulated fleet (``--nodes`` nodes of ``--gpus`` GPUs in ``--blocks`` topology blocks, ``--bad`` of them with a
rail down) is driven through ``controller.proof.decide`` -- the same pure function the controller's pass calls
-- once every 10 minutes for ``--days`` days. Each pair the decision starts finishes by the next pass and is
charged its run time (``--run-minutes``: pod start to exit, not measured on GPUs here); a pair with a bad node
fails. Reported per run time: GPU-hours spent per day, as a share of the fleet's GPU-hours, the coverage
reached (nodes proven within ``every``), when every node was first proven or named, whether every bad node
was convicted and no good one, and the decision's CPU time per pass.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from fabricguard.controller import proof as pf
from fabricguard.profile.model import Proof

T0 = datetime(2026, 12, 1, tzinfo=UTC)
STEP = timedelta(minutes=10)


def simulate(nodes: int, gpus: int, blocks: int, proof: Proof, run_min: float, bad: set[str],
             days: float) -> dict[str, object]:
    facts = {f"n{i:05d}": pf.NodeFacts(f"n{i:05d}", block=f"b{i * blocks // nodes}", joined=T0 - timedelta(days=9))
             for i in range(nodes)}
    state = pf.ProofState()
    running: list[pf.ActivePair] = []
    spent_by_day: dict[str, float] = {}
    all_covered_at: datetime | None = None
    cpu: list[float] = []
    lapsed = 0
    passes = int(days * 24 * 6)
    now = T0
    for _k in range(passes):
        results = []
        for a in running:
            fail = bool(set(a.nodes) & bad)
            gh = 2 * (proof.gpusPerPod or gpus) * run_min / 60
            results.append(pf.PairResult(a.name, a.nodes, "degraded" if fail else "passed",
                                         now - STEP + timedelta(minutes=run_min), a.purpose,
                                         busbw=100.0 if fail else 370.0, gpu_hours=gh))
            day = pf.utc_day(now - STEP)
            spent_by_day[day] = spent_by_day.get(day, 0.0) + gh
        t = time.perf_counter()
        d = pf.decide(state, facts, results, proof, gpus_per_node=gpus, largest_gang=0, now=now,
                      name_of=lambda i, now=now: f"p-{int(now.timestamp())}-{i}")
        cpu.append(time.perf_counter() - t)
        for n in d.taint:
            facts[n] = replace(facts[n], quarantined=True)
        for n in d.untaint:
            facts[n] = replace(facts[n], quarantined=False)
        state = d.state
        started = {p.name for p in d.start}
        running = [a for a in state.active if a.name in started]
        proven, counted = pf.coverage(state, facts, proof, now)
        if all_covered_at is None and proven == counted:
            all_covered_at = now
        elif all_covered_at is not None:
            lapsed = max(lapsed, counted - proven)  # nodes whose proof expired before it was renewed
        now += STEP
    convicted = {n for n, r in state.nodes.items() if r.state in ("convicted", "quarantined")}
    proven, counted = pf.coverage(state, facts, proof, now)
    per_day = [v for k, v in sorted(spent_by_day.items())]
    fleet = nodes * gpus * 24
    return {
        "per_day": per_day,
        "gpu_h_day": max(per_day) if per_day else 0.0,
        "share": (max(per_day) if per_day else 0.0) / fleet,
        "budget": proof.budget_gpu_hours(nodes, gpus),
        "covered": f"{proven}/{counted}",
        "all_at": (all_covered_at - T0) if all_covered_at else None,
        "bad_ok": convicted == bad,
        "lapsed": lapsed,
        "cpu_ms": 1000 * sorted(cpu)[len(cpu) // 2],
        "cpu_max_ms": 1000 * max(cpu),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--blocks", type=int, default=16)
    ap.add_argument("--every", default="24h")
    ap.add_argument("--budget", default="0.5%")
    ap.add_argument("--pair-duration", default="10m")
    ap.add_argument("--max-concurrent", type=int, default=32)
    ap.add_argument("--run-minutes", default="3,5,10")
    ap.add_argument("--bad", type=int, default=3)
    ap.add_argument("--days", type=float, default=2.0)
    ap.add_argument("--renew-at", type=float, default=pf.DUE_FRACTION,
                    help="Share of every after which a proof is renewed (the controller's DUE_FRACTION).")
    a = ap.parse_args()
    pf.DUE_FRACTION = a.renew_at
    bad = {f"n{(i * 337 + 11) % a.nodes:05d}" for i in range(a.bad)}
    print(f"{a.nodes} nodes x {a.gpus} GPUs in {a.blocks} blocks; every {a.every}; budget {a.budget}; "
          f"pairDuration {a.pair_duration}; maxConcurrent {a.max_concurrent}; {a.bad} bad; {a.days:g} days; "
          f"renew at {a.renew_at:g} x every")
    print(f"{'run':>5} {'GPU-h by day':>16} {'max share':>9} {'budget':>7} {'covered':>9} {'all proven after':>16} "
          f"{'bad found':>9} {'lapsed':>6} {'cpu/pass':>9}")
    for run in (float(x) for x in a.run_minutes.split(",")):
        proof = Proof(every=a.every, budget=a.budget, pairDuration=a.pair_duration,
                      maxConcurrent=a.max_concurrent, gpusPerPod=None)
        r = simulate(a.nodes, a.gpus, a.blocks, proof, run, bad, a.days)
        all_at = str(r["all_at"]) if r["all_at"] is not None else "never"
        by_day = "/".join(f"{v:.0f}" for v in r["per_day"])  # type: ignore[attr-defined]
        print(f"{run:>4g}m {by_day:>16} {r['share']:>9.2%} {r['budget']:>7.0f} {r['covered']:>9} "
              f"{all_at:>16} {('yes' if r['bad_ok'] else 'NO'):>9} {r['lapsed']:>6} {r['cpu_ms']:>7.1f}ms")


if __name__ == "__main__":
    main()
