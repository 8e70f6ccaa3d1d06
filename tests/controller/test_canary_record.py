"""A failed canary is never forgotten: every interleaving of a failing status write (HTTP 500), a lost Lease and a
killed process around the record and delete steps of a socket-fallback canary keeps the pool held and the
Workload Pending, against kmock's emulator over real HTTP.

The world: pool gh200-roce passed its canary A 12 minutes before the first pass (still fresh: two intervals are
20 minutes), and the next canary B has just finished on sockets (its rank logs on Lustre say ``NET/Socket``).
A Workload waits on the admission check. Before the fix the controller deleted B's JobSet before writing B's
outcome: one lost write and the next pass found nothing but A, and flipped the Workload to Ready.

A fault is ``(kind, k)`` applied to the k-th write (POST, PATCH, PUT, DELETE) of a pass: ``500`` answers it with
an error and changes nothing; ``lease`` makes the controller lose its Lease before it (it sends nothing more);
``kill`` stops the controller while the write is in flight and unapplied; ``kill-after`` applies the write and
stops the controller before the answer arrives. The in-process kills cancel the pass exactly at that request;
the subprocess tests below SIGKILL the real ``fabricguard controller --once`` at the same points.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from controller_support import (
    CANARY_IMAGE,
    FVS,
    JOBSETS,
    NOW,
    NS,
    POOL,
    ROCE_LOGS,
    SOCKET_LOGS,
    apply_aware_emulator,
    gate_check,
    jobset_finishes,
    kubeconfig,
    live,
    load_incident,
    pods_run,
    ranks_wrote,
    ts,
)
from kmock import Server

from fabricguard.controller.canary import canary_name, render_canary, spec_for
from fabricguard.controller.outcome import CanaryRun, Outcome
from fabricguard.controller.runner import RunConfig, run_pass
from fabricguard.profile import load_profile

NODES = ["prd-gh200-02", "prd-gh200-03"]
A_START = NOW - timedelta(minutes=15)
B_START = NOW - timedelta(minutes=4)
T1 = NOW + timedelta(minutes=7)  # B started 11 minutes ago: the next canary is due, so a pass also creates one
WRITES = {"POST", "PUT", "PATCH", "DELETE"}

Fault = tuple[str, int]


class World:
    """One emulated cluster and Lustre, with the fault plan its emulator applies to the controller's writes."""

    def __init__(self, tmp_path: Path, profile_path: Path) -> None:
        self.tmp_path = tmp_path
        self.profile_path = profile_path
        self.profile = load_profile(profile_path)
        self.pool = self.profile.pool(POOL)
        self.lustre = tmp_path / "lustre"
        self.lustre.mkdir(exist_ok=True)
        self.fault_now: Fault | None = None
        self.sent = 0
        self.writes: list[str] = []
        self.task: asyncio.Task[Any] | None = None
        self.release = asyncio.Event()
        self.stopped = asyncio.Event()
        self.killer: Any = None  # for the subprocess tests: kills the process
        self.b = canary_name(self.pool, B_START)
        self.only: tuple[str, ...] | None = ("nodes",)

    def fault(self, request: Any) -> Any:
        method = request.method.value.upper()
        if method not in WRITES:
            return None
        i, self.sent = self.sent, self.sent + 1
        self.writes.append(f"{method} {request.url.path}")
        f = self.fault_now
        if f is None or f[1] != i or f[0] == "lease":
            return None
        if f[0] == "500":
            return 500
        if f[0] == "kill":
            return self._kill()
        return ("after", self._kill())

    async def _kill(self) -> None:
        if self.task is not None:
            self.task.cancel()
        if self.killer is not None:
            self.killer()
        self.stopped.set()
        await asyncio.sleep(0.02)

    def seed(self, k8s: Any) -> None:
        load_incident(k8s, self.only)
        a = canary_name(self.pool, A_START)
        run_a = CanaryRun(a, Outcome.passed, ts(A_START), ts(A_START + timedelta(minutes=3)),
                          "transport roce; all_reduce 40 GB/s", [], "roce", {"all_reduce": 40.0}, NODES)
        fv = {"metadata": {"name": POOL, "uid": "fv-uid", "creationTimestamp": ts(NOW - timedelta(days=1)),
                           "labels": {"fabricguard.io/canary-pool": POOL}},
              "spec": {"pool": POOL, "interval": "10m"},
              "status": {"pool": POOL, "runs": [run_a.to_dict()], "lastOutcome": "passed",
                         "lastRun": run_a.finished, "lastSuccess": run_a.finished,
                         "active": {"jobSet": self.b, "started": ts(B_START)}}}
        k8s.objects[FVS, None, POOL] = fv
        # A's own files are still on Lustre (recorded: never judged again).
        ranks_wrote(self.lustre, {"metadata": {"name": a}}, ROCE_LOGS, busbw=40.0)
        body = render_canary(self.profile, self.pool, spec_for(self.profile, self.pool, NS, B_START),
                             image=CANARY_IMAGE, owner={"metadata": {"name": POOL, "uid": "fv-uid"}})
        body["metadata"] |= {"creationTimestamp": ts(B_START), "uid": f"uid-{self.b}"}
        k8s.objects[JOBSETS, NS, self.b] = {k: v for k, v in body.items() if k not in ("apiVersion", "kind")}
        stored = json.loads(json.dumps(k8s.objects[JOBSETS, NS, self.b].raw))
        pods_run(k8s, stored, NODES, phase="Succeeded")
        ranks_wrote(self.lustre, stored, SOCKET_LOGS, busbw=4.1)  # NCCL quietly chose sockets
        jobset_finishes(k8s, stored, NOW - timedelta(minutes=1))

    def cfg(self, kc: str) -> RunConfig:
        return RunConfig(self.profile, image=CANARY_IMAGE, kubeconfig=kc, lustre_root=self.lustre, identity="solo")


def _check_state(k8s: Any) -> str:
    return str(gate_check(k8s, "jobset-llama-ft-3b1c2")["state"])


def _fv(k8s: Any) -> dict[str, Any]:
    (fv,) = live(k8s, FVS)
    return fv


def _b_alive(k8s: Any, b: str) -> bool:
    return any(js["metadata"]["name"] == b for js in live(k8s, JOBSETS))


def _b_recorded(k8s: Any, b: str) -> dict[str, Any] | None:
    return next((r for r in _fv(k8s)["status"].get("runs") or () if r["name"] == b), None)


def _invariants(world: World, k8s: Any, label: str) -> None:
    assert _check_state(k8s) in ("Pending", "Retry"), f"{label}: the Workload was let onto a fabric that fell back"
    assert _b_alive(k8s, world.b) or _b_recorded(k8s, world.b), f"{label}: B's JobSet is gone and B is unrecorded"


async def _pass(world: World, kc: str, at: datetime, f: Fault | None) -> Any:
    """One controller pass under fault ``f``; returns its report, or None when it was killed."""
    world.fault_now, world.sent = f, 0
    lease_at = f[1] if f is not None and f[0] == "lease" else None
    leading = (lambda: world.sent < lease_at) if lease_at is not None else None
    world.task = asyncio.create_task(run_pass(world.cfg(kc), at, act=True, leading=leading))
    try:
        return await world.task
    except asyncio.CancelledError:
        if not world.stopped.is_set():
            raise
        world.stopped.clear()
        return None
    finally:
        world.task = None
        world.fault_now = None


async def _run(world: World, k8s: Any, kc: str, plan: list[Fault | None]) -> None:
    label = f"plan {plan}"
    at = T1
    for f in plan:
        rep = await _pass(world, kc, at, f)
        at += timedelta(seconds=1)
        if rep is not None:
            assert rep.result.pools[POOL].ready is False, f"{label}: {rep.result.pools[POOL].message}"
        _invariants(world, k8s, label)
    for _ in range(4):  # clean passes until B is recorded and its JobSet removed
        rep = await _pass(world, kc, at, None)
        at += timedelta(seconds=1)
        assert rep.result.pools[POOL].ready is False, f"{label}: {rep.result.pools[POOL].message}"
        _invariants(world, k8s, label)
        if not _b_alive(k8s, world.b) and _b_recorded(k8s, world.b):
            break
    run = _b_recorded(k8s, world.b)
    assert run is not None and run["outcome"] == "fallback" and run["transport"] == "socket", (label, run)
    assert not _b_alive(k8s, world.b), f"{label}: B's JobSet was never removed"
    st = _fv(k8s)["status"]
    assert st["lastOutcome"] == "fallback" and st["runs"][0]["name"] == world.b, (label, st)
    assert [r["name"] for r in st["runs"]].count(world.b) == 1, f"{label}: B recorded twice"


KINDS = ("500", "lease", "kill", "kill-after")
LOST = ("500", "lease", "kill")  # the ways a write does not land


async def _fresh(tmp_path: Path, profile_path: Path, name: str):  # type: ignore[no-untyped-def]
    d = tmp_path / name
    d.mkdir()
    world = World(d, profile_path)
    k8s = apply_aware_emulator(world.fault)
    return world, k8s


async def _scenario(tmp_path: Path, profile_path: Path, name: str, plan: list[Fault | None]) -> World:
    world, k8s = await _fresh(tmp_path, profile_path, name)
    async with k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "31", "gitVersion": "v1.31.6", "platform": "linux/amd64"}
        world.seed(k8s)
        kc = kubeconfig(world.tmp_path, str(server.url).rstrip("/"))
        await _run(world, k8s, kc, plan)
    return world


async def test_clean_passes_record_first_then_delete(tmp_path: Path, profile_path: Path) -> None:
    """Without faults: the first pass records B (and starts the next canary), the second deletes B's JobSet."""
    world, k8s = await _fresh(tmp_path, profile_path, "clean")
    async with k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "31", "gitVersion": "v1.31.6", "platform": "linux/amd64"}
        world.seed(k8s)
        kc = kubeconfig(world.tmp_path, str(server.url).rstrip("/"))
        rep = await _pass(world, kc, T1, None)
        p1 = list(world.writes)
        assert rep.result.pools[POOL].outcome == "fallback" and not rep.result.pools[POOL].ready
        # Create the next canary, record B (its conditions in the same write), keep the AdmissionCheck Active,
        # hold the Workload, its Event; then the root cause's Events on the objects at fault (DaemonSet, Nodes).
        kinds = [w.split("/")[-1] if w.startswith("POST") else w.split("/")[-2] for w in p1]
        assert kinds[:5] == ["jobsets", POOL, "fabric-validated", "jobset-llama-ft-3b1c2", "events"], p1
        assert set(kinds[5:]) <= {"events"} and any("/namespaces/network-operator/events" in w for w in p1[5:]), p1
        assert p1[RECORD].endswith(f"/fabricvalidations/{POOL}/status")
        assert not any(w.startswith("DELETE") for w in p1), p1  # B's JobSet outlives its unconfirmed record
        world.writes.clear()
        await _pass(world, kc, T1 + timedelta(seconds=1), None)
        # The next pass read the record back: now B's JobSet goes; then the status names the adopted canary.
        assert world.writes[0] == f"DELETE /apis/jobset.x-k8s.io/v1alpha2/namespaces/{NS}/jobsets/{world.b}"
        assert world.writes[1].endswith(f"/fabricvalidations/{POOL}/status") and len(world.writes) == 2
        assert _check_state(k8s) in ("Pending", "Retry")


RECORD = 1  # pass 1's writes: [create the next canary, record B, AdmissionCheck, Workload, Event]


def _plans() -> list[list[Fault | None]]:
    plans: list[list[Fault | None]] = []
    plans += [[(kind, k)] for kind in KINDS for k in range(5)]  # every fault at every write of pass 1
    plans += [[None, (kind, k)] for kind in KINDS for k in range(2)]  # ... and of pass 2 (delete B, status)
    # B's record lost in pass 1, and the next attempt at it (the first status write of pass 2) hit again.
    plans += [[(lost, RECORD), (kind, 0)] for lost in LOST for kind in KINDS]
    # B's record lost, then recorded, then the delete (first write of pass 3) hit by each fault.
    plans += [[("500", RECORD), None, (kind, 0)] for kind in KINDS]
    return plans


CHUNKS = 6  # the plans split so that parallel workers share them; every plan still runs once


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
async def test_every_interleaving_keeps_the_pool_held(tmp_path: Path, profile_path: Path, chunk: int) -> None:
    for n, plan in enumerate(_plans()):
        if n % CHUNKS == chunk:
            await _scenario(tmp_path, profile_path, f"s{n}", plan)


async def _killed_cli_pass(world: World, kc: str, at: datetime, f: Fault) -> int:
    """``fabricguard controller --once`` in its own process, SIGKILLed at fault ``f``; returns its exit status."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2] / "src"),
                                                         os.environ.get("PYTHONPATH", "")])}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "fabricguard", "controller", "--profile", str(world.profile_path), "--once",
        "--now", ts(at), "--kubeconfig", kc, "--lustre-root", str(world.lustre), "--canary-image", CANARY_IMAGE,
        "--format", "json", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    world.fault_now, world.sent = f, 0
    world.killer = lambda: proc.send_signal(signal.SIGKILL)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    finally:
        world.killer, world.fault_now = None, None
    world.stopped.clear()
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, out[-500:], err[-2000:])
    return proc.returncode


@pytest.mark.slow
@pytest.mark.parametrize("plan", [[("kill", RECORD)], [("kill-after", RECORD)], [None, ("kill", 0)],
                                  [None, ("kill-after", 0)]], ids=["before-record", "after-record",
                                                                   "before-delete", "after-delete"])
async def test_a_real_controller_process_killed_at_the_record_or_delete(tmp_path: Path, profile_path: Path,
                                                                       plan: list[Fault | None]) -> None:
    world, k8s = await _fresh(tmp_path, profile_path, "kill")
    async with k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "31", "gitVersion": "v1.31.6", "platform": "linux/amd64"}
        world.seed(k8s)
        kc = kubeconfig(world.tmp_path, str(server.url).rstrip("/"))
        at = T1
        for f in plan:
            if f is None:
                await _pass(world, kc, at, None)
            else:
                await _killed_cli_pass(world, kc, at, f)
            at += timedelta(seconds=1)
            _invariants(world, k8s, f"killed process, plan {plan}")
        for _ in range(3):
            rep = await _pass(world, kc, at, None)
            at += timedelta(seconds=1)
            assert rep.result.pools[POOL].ready is False
            _invariants(world, k8s, f"after the kill, plan {plan}")
        assert _b_recorded(k8s, world.b)["outcome"] == "fallback" and not _b_alive(k8s, world.b)


async def test_a_finished_run_whose_jobset_vanished_unrecorded_is_judged_from_lustre(tmp_path: Path,
                                                                                    profile_path: Path) -> None:
    """The record failed (500) and then B's JobSet went (its TTL, or a person): B's files on Lustre still hold it."""
    world, k8s = await _fresh(tmp_path, profile_path, "ttl")
    async with k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "31", "gitVersion": "v1.31.6", "platform": "linux/amd64"}
        world.seed(k8s)
        kc = kubeconfig(world.tmp_path, str(server.url).rstrip("/"))
        rep = await _pass(world, kc, T1, ("500", RECORD))
        assert rep.errors and not rep.result.pools[POOL].ready
        assert _b_recorded(k8s, world.b) is None
        k8s.objects[JOBSETS, NS, world.b].delete()  # the JobSet controller's TTL after finishing
        rep = await _pass(world, kc, T1 + timedelta(seconds=5), None)
        pool = rep.result.pools[POOL]
        assert pool.ready is False and pool.outcome == "fallback", pool
        run = _b_recorded(k8s, world.b)
        assert run is not None and run["outcome"] == "fallback" and run["transport"] == "socket", run
        assert "judged from what it left on Lustre" in run["message"]
        assert any("NET/Socket" in e for e in run["evidence"]), run
        assert _check_state(k8s) in ("Pending", "Retry")
        # Recorded now: later passes do not judge it again, and the passing run A (also on Lustre) never was.
        before = json.dumps(_fv(k8s)["status"]["runs"])
        await _pass(world, kc, T1 + timedelta(seconds=10), None)
        runs = _fv(k8s)["status"]["runs"]
        assert json.dumps(runs) == before and [r["outcome"] for r in runs][-1] == "passed"


async def test_a_run_gone_without_a_trace_is_a_failure_not_an_older_pass(tmp_path: Path, profile_path: Path) -> None:
    """The status named B as the running canary; B's JobSet and its job directory are gone, nothing recorded."""
    world, k8s = await _fresh(tmp_path, profile_path, "gone")
    async with k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "31", "gitVersion": "v1.31.6", "platform": "linux/amd64"}
        world.seed(k8s)
        kc = kubeconfig(world.tmp_path, str(server.url).rstrip("/"))
        k8s.objects[JOBSETS, NS, world.b].delete()
        import shutil

        shutil.rmtree(world.lustre / NS / world.b)
        rep = await _pass(world, kc, T1, None)
        pool = rep.result.pools[POOL]
        assert pool.ready is False and pool.outcome == "failed" and "is gone" in pool.message, pool
        assert _b_recorded(k8s, world.b)["outcome"] == "failed"
        assert _check_state(k8s) in ("Pending", "Retry")
