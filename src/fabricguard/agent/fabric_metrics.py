"""What no exporter the field runs says about a node's fabric and Lustre client, read at every scrape.

node-exporter's InfiniBand collector gives port traffic (``node_infiniband_port_data_*_bytes_total``) and DCGM
exporter the GPUs; these are the agent's additions, read from sysfs/procfs below ``--root`` when Prometheus
scrapes, so they are as fresh as the scrape:

- ``fabricguard_rdma_port_up{device,port,link_layer}``: 1 when the port is ACTIVE and LinkUp, else 0, so a port
  that goes down on a node that is still Ready shows at once (``changes()`` counts its flaps);
- ``fabricguard_rdma_port_physical_state{device,port}``: the numeric physical state (5 LinkUp, 3 Disabled, ...);
- ``fabricguard_rdma_port_link_downed_total`` and ``fabricguard_rdma_port_symbol_errors_total`` (counters from
  ``ports/N/counters``; alerts take their ``rate()``);
- ``fabricguard_lustre_import_full{target}``: 1 when the client's import of an OST/MDT is FULL (connected);
- ``fabricguard_lustre_client_rpc_wait_seconds_total{target}`` and ``fabricguard_lustre_client_rpcs_total``:
  the ``req_waittime`` of every OSC/MDC (their rates' ratio is the mean RPC latency);
- ``fabricguard_lustre_client_read_bytes_total{fs}`` / ``..._write_bytes_total``: llite traffic.

No maintained Prometheus exporter exposes the Lustre *client's* RPC latency: HPE's lustre_exporter is archived and
reads mostly server-side stats, and telegraf's lustre2 input belongs to another pipeline. So the agent reads this
small set itself (docs/metrics.md).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from fabricguard.probes.host import MAX_TABLE, read_rdma, read_small
from fabricguard.probes.lustre_client import LUSTRE_DIRS, parse_import_state, parse_stats, target_of
from fabricguard.probes.nic_counters import read_port_counters

_PHYS = re.compile(r"^\s*(\d+)")


def _read(p: Path) -> str | None:
    # The probes' guarded read: a FIFO, a device or an oversized file is refused before it is opened.
    return read_small(p, MAX_TABLE)


_target = target_of


class FabricCollector(Collector):
    """A prometheus-client collector over the node's sysfs/procfs (``root`` is ``/`` in the DaemonSet)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def describe(self) -> list[GaugeMetricFamily | CounterMetricFamily]:
        """Nothing: without it, registering would run :meth:`collect` (read sysfs) at once, unguarded."""
        return []

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        # Unreadable trees give no samples rather than a failed scrape; the checks report what is unreadable.
        with contextlib.suppress(OSError):
            yield from self._rdma()
        with contextlib.suppress(OSError):
            yield from self._lustre()

    def _rdma(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        up = GaugeMetricFamily("fabricguard_rdma_port_up", "1 when the RDMA port is ACTIVE and LinkUp.",
                               labels=["device", "port", "link_layer"])
        phys = GaugeMetricFamily("fabricguard_rdma_port_physical_state",
                                 "Numeric physical state of the RDMA port (5 LinkUp, 3 Disabled, 2 Polling).",
                                 labels=["device", "port"])
        downed = CounterMetricFamily("fabricguard_rdma_port_link_downed", "Times the port's link went down.",
                                     labels=["device", "port"])
        symbols = CounterMetricFamily("fabricguard_rdma_port_symbol_errors", "Symbol errors on the port's link.",
                                      labels=["device", "port"])
        _, ports = read_rdma(self.root)
        for p in ports:
            up.add_metric([p.device, p.port, (p.link_layer or "").strip()], 1 if p.active else 0)
            m = _PHYS.match(p.phys_state or "")
            if m:
                phys.add_metric([p.device, p.port], int(m.group(1)))
            counters = read_port_counters(self.root, p.device, p.port)  # the one reader (FabricLinks uses it)
            for family, name in ((downed, "downed"), (symbols, "symbol")):
                if name in counters:
                    family.add_metric([p.device, p.port], counters[name])
        yield from (up, phys, downed, symbols)

    def _lustre(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        full = GaugeMetricFamily("fabricguard_lustre_import_full",
                                 "1 when the Lustre client's import of the target is FULL (connected).",
                                 labels=["target", "state"])
        wait = CounterMetricFamily("fabricguard_lustre_client_rpc_wait_seconds",
                                   "Summed RPC wait time of the client's OSC/MDC (req_waittime).", labels=["target"])
        rpcs = CounterMetricFamily("fabricguard_lustre_client_rpcs", "RPCs of the client's OSC/MDC (req_waittime).",
                                   labels=["target"])
        read = CounterMetricFamily("fabricguard_lustre_client_read_bytes", "Bytes read through llite.",
                                   labels=["fs"])
        write = CounterMetricFamily("fabricguard_lustre_client_write_bytes", "Bytes written through llite.",
                                    labels=["fs"])
        seen: set[tuple[str, str]] = set()
        for d in LUSTRE_DIRS:
            base = self.root / d
            for kind in ("osc", "mdc"):
                for obj in sorted((base / kind).glob("*")) if (base / kind).is_dir() else []:
                    target = _target(obj.name)
                    if (kind, target) in seen:
                        continue
                    imp = _read(obj / "import")
                    state = parse_import_state(imp) if imp else None
                    if state is not None:
                        full.add_metric([target, state], 1 if state == "FULL" else 0)
                    stats = _read(obj / "stats")
                    rw = parse_stats(stats).get("req_waittime") if stats else None
                    if rw is not None and rw.total is not None:
                        unit = 1e-6 if rw.unit in ("usec", "usecs") else 1.0
                        wait.add_metric([target], rw.total * unit)
                        rpcs.add_metric([target], rw.samples)
                    if state is not None or rw is not None:
                        seen.add((kind, target))
            for obj in sorted((base / "llite").glob("*")) if (base / "llite").is_dir() else []:
                fs = _target(obj.name)
                if ("llite", fs) in seen:
                    continue
                stats = _read(obj / "stats")
                lines = parse_stats(stats) if stats else {}
                for family, key in ((read, "read_bytes"), (write, "write_bytes")):
                    s = lines.get(key)
                    if s is not None and s.total is not None:
                        family.add_metric([fs], s.total)
                if lines:
                    seen.add(("llite", fs))
        yield from (full, wait, rpcs, read, write)
