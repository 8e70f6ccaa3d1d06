"""The ``FabricLinks`` node condition: the node's RDMA ports and their counters, for whoever must tell a dead or
flapping link from a stuck process (the controller quotes it when a job hangs waiting on this node).

Each run reads every port's state and counters (:mod:`fabricguard.probes.nic_counters`) and compares them with the
previous run's: what rose since (link downs, symbol/receive errors, discards, ack timeouts) and the bytes per
second it moved. The condition is

* ``True``/``LinksHealthy``: every port up, no error counter rose since the last run;
* ``False``/``LinkDown`` (a port not ACTIVE/LinkUp), ``LinkFlapped`` (``link_downed`` rose), ``LinkErrors``
  (another error counter rose);
* ``Unknown``/``NoPorts``: no RDMA port to read.

It rides on the agent's own status writes: written with ``FabricReady`` (its heartbeat, every 5 minutes) and on
its own only when its status or reason changes, so a node whose links do not change costs no write; the counters
in the message are as old as ``lastHeartbeatTime`` says. The message lists the troubled ports first and is cut
at :data:`MAX_MESSAGE`. The Prometheus view of the same counters is ``agent/fabric_metrics.py`` (at every scrape).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from fabricguard import names
from fabricguard.objects import set_condition
from fabricguard.probes.host import read_rdma
from fabricguard.probes.nic_counters import ERRORS, read_port_counters
from fabricguard.times import format_time

MAX_MESSAGE = 1024
_NUM = re.compile(r"^\s*\d+:\s*")


def _rate(bps: float) -> str:
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bps >= size:
            return f"{bps / size:.3g} {unit}"
    return f"{bps:.0f} B/s"


@dataclass(frozen=True)
class Port:
    """One port's line in the message, and what is wrong with it ("" when nothing)."""

    name: str
    text: str
    trouble: str  # "" | "LinkDown" | "LinkFlapped" | "LinkErrors"


@dataclass
class LinkWatch:
    """The previous run's counters per port (monotonic seconds), kept by the agent between runs."""

    previous: dict[str, tuple[float, dict[str, int]]] = field(default_factory=dict)

    def judge(self, root: Path, t: float) -> tuple[str, str, str]:
        """(status, reason, message) of the node's ports now, against the previous run."""
        try:
            _, ports = read_rdma(root)
        except OSError as exc:
            return "Unknown", "NoPorts", f"/sys/class/infiniband cannot be listed: {exc.strerror or exc}"
        lines: list[Port] = []
        seen: dict[str, tuple[float, dict[str, int]]] = {}
        for p in ports:
            name = f"{p.device}/{p.port}"
            if p.error:
                lines.append(Port(name, f"{name} unreadable ({p.error[:80]})", "LinkDown"))
                continue
            counters = read_port_counters(root, p.device, p.port)
            seen[name] = (t, counters)
            lines.append(_port_line(name, p.active, p.state, p.phys_state, p.rate_gbps, counters,
                                    self.previous.get(name), t))
        self.previous = seen
        if not lines:
            return "Unknown", "NoPorts", "no RDMA port under /sys/class/infiniband"
        order = {"LinkDown": 0, "LinkFlapped": 1, "LinkErrors": 2, "": 3}
        lines.sort(key=lambda line: (order[line.trouble], line.name))
        reason = lines[0].trouble or "LinksHealthy"
        bad = sum(1 for line in lines if line.trouble)
        lead = f"{len(lines)} port(s), {bad} in trouble" if bad else f"{len(lines)} port(s) up, no error rose"
        message = lead + ": " + "; ".join(line.text for line in lines)
        if len(message) > MAX_MESSAGE:
            message = message[:MAX_MESSAGE - 1] + "…"
        return ("False" if bad else "True"), reason, message


def _port_line(name: str, up: bool, state: str | None, phys: str | None, gbps: float | None,
               counters: dict[str, int], before: tuple[float, dict[str, int]] | None, t: float) -> Port:
    words = [name, "up" if up else f"{_NUM.sub('', state or '?')}/{_NUM.sub('', phys or '?')}"]
    if gbps:
        words.append(f"{gbps:g}G")
    seconds = t - before[0] if before else 0.0
    old = before[1] if before else {}
    if seconds > 0:
        moved = [f"{k[:2]} {_rate(max(0, counters[k] - old[k]) / seconds)}" for k in ("rx_bytes", "tx_bytes")
                 if k in counters and k in old]
        words.append((", ".join(moved) + f" over {seconds:.0f} s") if moved else "no byte counters")
    else:
        words.append("first reading")
    rose: list[str] = []
    totals: list[str] = []
    for k in ERRORS:
        if k not in counters:
            continue
        d = counters[k] - old[k] if k in old else 0
        if d < 0:  # a driver reload reset it: what it counts since
            d = counters[k]
        if counters[k] or d:
            totals.append(f"{k} {counters[k]}" + (f"(+{d})" if d else ""))
        if d:
            rose.append(k)
    # A port where nothing rose says so in two words (its totals are in Prometheus): eight ports fit in 1 KiB.
    words.append(", ".join(totals) if rose or (totals and not up) else "no error rose" if totals else "errors 0")
    trouble = "" if up else "LinkDown"
    if not trouble and "downed" in rose:
        trouble = "LinkFlapped"
    elif not trouble and rose:
        trouble = "LinkErrors"
    return Port(name, " ".join(words), trouble)


def build_links_condition(status: str, reason: str, message: str, previous: dict[str, Any] | None,
                          now: datetime) -> dict[str, Any]:
    """The condition as stored on the Node (``lastHeartbeatTime``: when these counters were read)."""
    return set_condition([dict(previous)] if previous else [], names.FABRIC_LINKS, status, reason, message, now,
                         lastHeartbeatTime=format_time(now))


def links_changed(previous: dict[str, Any] | None, condition: dict[str, Any]) -> bool:
    """Whether the condition must be written on its own: new, or another status or reason (the counters alone
    refresh with the heartbeat)."""
    return previous is None or any(previous.get(k) != condition.get(k) for k in ("status", "reason"))
