"""While a job runs: is it hung, and on which rank, pod and node? NCCL's RAS asked from inside the job's pod.

A running job's collectives advance: its Inspector records keep bringing new ``coll_sn`` (``BusbwView.progress``).
When they stop for ``spec.inspector.hangAfter`` (longer than the job's longest checkpoint or evaluation: a
checkpoint stops the collectives too), the controller asks NCCL's RAS, which every NCCL process serves on
``localhost:28028``, reachable only from inside the pod's network namespace.

**How it asks: exec, not a sidecar.** An injected sidecar would sit in every pod of every job (a container, its
image pull and memory, a port the controller must reach, a NetworkPolicy hole) to answer a question asked only of
stalled jobs; exec asks one pod of one stalled job, on demand, with a fixed command (``nccl.ras.CLIENT``, plain
Python, no ``ncclras`` binary needed in the image). Its cost is RBAC: ``get`` and ``create`` on ``pods/exec``
cluster-wide (the websocket exec is a GET: authorized as ``get``, and from Kubernetes 1.35 as ``create`` too),
which is powerful (it runs a command in a tenant's container); the controller's code runs only ``python3 -c
CLIENT`` (``controller/kube.py``'s table, rendered by ``render controller``). A cluster that refuses that grant
loses only hang attribution: the exec is refused (a Forbidden error, said once), the rest keeps working.

**When it is a hang** (Ray's rule, ``nccl.ras.hang_verdict``): two queries ``query_gap_s`` apart, counts
mismatched in both and no count advanced between them. Then the job is annotated (``fabricguard.io/hang``: the
rank, pod and node the others wait for, the job's last transport verdict from its own logs, and that node's NICs:
its ``FabricLinks`` condition, which the node's agent writes (``agent/links.py``: each port up or not, the error
counters that rose and the bytes per second moved over its last minute), with how old it is, so a dead or flapping
link reads apart from a stuck process), told in a Warning Event ``FabricJobHung``, exported
(``fabricguard_job_hung``) and, with the pool's ``onHang: stop``, stopped like ``onFallback: stop``. Matched
counts (a checkpoint, a framework-side wait, NVIDIA/nccl #1730) are not a hang: the job is not asked again until
another ``hangAfter`` passes without progress.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fabricguard import names
from fabricguard import objects as o
from fabricguard.agent.loop import HEARTBEAT_S
from fabricguard.controller.actions import Action, Annotate, MergePatch, event
from fabricguard.controller.suspects import PodPlace, RunningJob
from fabricguard.nccl.ras import HangVerdict, RasError, RasStatus, hang_verdict, parse_status
from fabricguard.times import parse_time

ANN_HANG = "fabricguard.io/hang"
QUERY_GAP_S = 60.0  # between the two queries: RAS's own collective takes up to 10 s
MAX_ANNOTATION = 2000
MAX_HOST = 64
# A live agent rewrites FabricLinks at least every heartbeat (5 min): counters older than two are stale.
NIC_STALE_S = 2 * HEARTBEAT_S
NIC_TEXT = 400  # of one node's FabricLinks message in the annotation (its troubled ports come first)

# (job, the pod to ask) -> the RAS report's bytes; raises RasError or a KubeError when it cannot be asked.
RasQuerier = Callable[[RunningJob, PodPlace], Awaitable[bytes]]


@dataclass
class HangWatch:
    """One running job's progress and RAS queries (kept by ``LiveJobs`` between polls)."""

    progress: int = -1
    since: datetime | None = None  # when progress last changed (the controller's clock, never the nodes')
    queries: list[RasStatus] = field(default_factory=list)
    asked_at: datetime | None = None
    quiet_until: datetime | None = None  # after a "not hung": not asked again before this
    verdict: HangVerdict | None = None
    told: bool = False
    error: str = ""

    def observe(self, progress: int, now: datetime) -> None:
        if progress != self.progress:
            self.progress, self.since = progress, now
            self.queries, self.asked_at, self.quiet_until, self.verdict, self.told = [], None, None, None, False

    def due(self, now: datetime, hang_after_s: float, gap_s: float = QUERY_GAP_S) -> bool:
        """Whether RAS should be asked now."""
        if self.since is None or self.progress <= 0 or self.told:
            return False  # a job that never showed a collective is not judged (no records: the plugin is off)
        if (now - self.since).total_seconds() < hang_after_s:
            return False
        if self.quiet_until is not None and now < self.quiet_until:
            return False
        return self.asked_at is None or (now - self.asked_at).total_seconds() >= gap_s

    def answered(self, raw: bytes, now: datetime, hang_after_s: float) -> HangVerdict | None:
        """Record one answer; with two, the verdict (a "not hung" quiets the job for another hangAfter)."""
        self.asked_at = now
        try:
            self.queries.append(parse_status(raw))
        except RasError as exc:
            self.error = str(exc)
            return None
        self.queries = self.queries[-2:]
        if len(self.queries) < 2:
            return None
        v = hang_verdict(self.queries[0], self.queries[1])
        self.verdict = v
        if not v.hung:
            self.queries = []
            self.quiet_until = datetime.fromtimestamp(now.timestamp() + hang_after_s, tz=now.tzinfo)
        return v


def pod_to_ask(places: dict[str, PodPlace]) -> PodPlace | None:
    """Any running pod of the job answers for all of it (RAS gathers from every process); the first by name."""
    pods = sorted({p.pod: p for p in places.values()}.values(), key=lambda p: p.pod)
    return pods[0] if pods else None


def node_links(nodes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Node name -> its ``FabricLinks`` condition (what the agent last wrote of its NICs), for nodes that have
    one."""
    out: dict[str, dict[str, Any]] = {}
    for n in nodes:
        c = o.find_condition(n, names.FABRIC_LINKS)
        if c is not None:
            out[o.name_of(n)] = c
    return out


def nic_summary(condition: dict[str, Any] | None, now: datetime) -> dict[str, Any]:
    """A node's NIC counters for the hang annotation: status, reason, the agent's message (cut), when it was
    read and whether that is older than :data:`NIC_STALE_S`; or why there are none."""
    if condition is None:
        return {"absent": "no FabricLinks condition on the node (no fabricguard agent there, one older than this "
                          "release, or a node without RDMA ports)"}
    read = parse_time(condition.get("lastHeartbeatTime")) or parse_time(condition.get("lastTransitionTime"))
    age = (now - read).total_seconds() if read is not None else None
    message = str(condition.get("message") or "")
    out: dict[str, Any] = {"status": str(condition.get("status") or ""), "reason": str(condition.get("reason") or ""),
                           "counters": message if len(message) <= NIC_TEXT else message[:NIC_TEXT - 1] + "…",
                           "read": str(condition.get("lastHeartbeatTime") or "")}
    out["age_s"] = int(age) if age is not None else None
    out["stale"] = age is None or age > NIC_STALE_S
    return out


def nic_words(nic: dict[str, Any]) -> str:
    """One node's NIC counters (:func:`nic_summary`) as the Event and ``why`` say them."""
    if "absent" in nic:
        return f"its NIC counters: none ({nic['absent']})"
    age = nic.get("age_s")
    when = "read at an unknown time" if age is None else f"read {age // 60} min ago"
    if nic.get("stale"):
        when += f", STALE: older than {int(NIC_STALE_S // 60)} min, the node's agent has not written since"
    return f"its NICs (FabricLinks {nic.get('status')}/{nic.get('reason')}, {when}): {nic.get('counters', '')}"


def hang_actions(job: RunningJob, verdict: HangVerdict, places: dict[str, PodPlace], transport: str,
                 on_hang: str, workload: dict[str, Any] | None, now: datetime,
                 links: dict[str, dict[str, Any]] | None = None) -> tuple[list[Action], dict[str, Any]]:
    """The annotation, Event (and onHang: stop) for a confirmed hang; and the summary written. ``links``: node
    name -> its FabricLinks condition (:func:`node_links`)."""
    waited: list[dict[str, Any]] = []
    for w in verdict.waited_for[:8]:
        p = places.get(w.host)
        # The RAS report comes out of the tenant's container: its host is cut to an address's length (IPv6: 45).
        waited.append({"rank": w.rank, "pod": p.pod if p else "", "node": p.node if p else "",
                       "ip": w.host[:MAX_HOST], "pid": w.pid, "cuda_dev": w.cuda_dev, "why": w.why})
    nics = {x["node"]: nic_summary((links or {}).get(x["node"]), now) for x in waited if x["node"]}
    # The Event names the first waited-for rank and its NICs whatever the annotation has to leave out.
    first: dict[str, Any] = waited[0] if waited else {"rank": "?", "pod": "?", "node": "?", "why": ""}
    nic = nics.get(first["node"]) if first["node"] else None
    summary: dict[str, Any] = {"waited_for": list(waited), "transport": transport, "nics": dict(nics),
                               "rule": verdict.why}
    text = json.dumps(summary, separators=(",", ":"))
    while len(text) > MAX_ANNOTATION and summary["waited_for"]:
        gone = summary["waited_for"].pop()
        if not any(x["node"] == gone["node"] for x in summary["waited_for"]):
            summary["nics"].pop(gone["node"], None)
        text = json.dumps(summary, separators=(",", ":"))
    more = f" (and {len(verdict.waited_for) - 1} more)" if len(verdict.waited_for) > 1 else ""
    detail = (f"hung: the job's ranks wait for rank {first['rank']} (pod {first['pod'] or 'unknown'}, node "
              f"{first['node'] or 'unknown'}: {first['why']}){more}; NCCL RAS, counts mismatched and not advancing "
              f"over two queries; the job's last transport verdict: {transport or 'unknown'}"
              + (f"; {nic_words(nic)}" if nic is not None else ""))
    actions: list[Action] = [
        Annotate(job.api_version, job.plural, job.namespace, job.name, {ANN_HANG: text}),
        event(job.obj, job.api_version, job.kind, "FabricJobHung", detail[:1000], now, warning=True),
    ]
    if on_hang == "stop":
        wl = workload if names.KUEUE_QUEUE_NAME in o.labels_of(job.obj) else None
        if wl is not None:
            actions.append(MergePatch(names.KUEUE_API, "workloads", job.namespace, o.name_of(wl),
                                      {"spec": {"active": False}}))
            how = f"Workload {o.name_of(wl)} deactivated"
        else:
            actions.append(MergePatch(job.api_version, job.plural, job.namespace, job.name,
                                      {"spec": {"suspend": True}}))
            how = f"{job.kind} suspended"
        actions.append(event(job.obj, job.api_version, job.kind, "FabricJobHungStopped",
                             f"stopped by the pool's onHang: stop: {how}", now, warning=True))
    return actions, summary
