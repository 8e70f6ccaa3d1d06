"""An RDMA port's counters from sysfs: what tells a dead or flapping link from a stuck process.

``/sys/class/infiniband/<dev>/ports/<n>/counters/`` holds the port's PMA counters (IB and RoCE alike):
``link_downed`` (the link went down: a flap), ``link_error_recovery``, ``symbol_error``, ``port_rcv_errors``,
``port_xmit_discards``, and ``port_rcv_data``/``port_xmit_data``, which count **4-octet words** (the PMA's
PortRcvData is "octets divided by 4"; node-exporter's InfiniBand collector multiplies by 4 too). ``hw_counters/``
holds the driver's own: mlx5's ``local_ack_timeout_err`` (transport retries that timed out: a lossy path), and on
devices without PMA counters (EFA) ``rx_bytes``/``tx_bytes``. A counter that is absent is left out, never zero.
"""

from __future__ import annotations

from pathlib import Path

from fabricguard.probes.host import read_small

# name -> (directory, file, factor to bytes or 1)
COUNTERS: dict[str, tuple[str, str, int]] = {
    "downed": ("counters", "link_downed", 1),
    "recovered": ("counters", "link_error_recovery", 1),
    "symbol": ("counters", "symbol_error", 1),
    "rcv_err": ("counters", "port_rcv_errors", 1),
    "xmit_disc": ("counters", "port_xmit_discards", 1),
    "ack_timeout": ("hw_counters", "local_ack_timeout_err", 1),
    "rx_bytes": ("counters", "port_rcv_data", 4),
    "tx_bytes": ("counters", "port_xmit_data", 4),
}
# Devices without PMA data counters (EFA) count bytes in hw_counters.
_BYTES_FALLBACK = {"rx_bytes": ("hw_counters", "rx_bytes"), "tx_bytes": ("hw_counters", "tx_bytes")}
ERRORS = ("downed", "recovered", "symbol", "rcv_err", "xmit_disc", "ack_timeout")


def _int(p: Path) -> int | None:
    text = read_small(p)
    try:
        return int(text.split()[0]) if text else None
    except ValueError:
        return None


def read_port_counters(root: Path, device: str, port: str) -> dict[str, int]:
    """The counters of one port that could be read (bytes already in octets)."""
    base = root / "sys/class/infiniband" / device / "ports" / port
    out: dict[str, int] = {}
    for name, (sub, file, factor) in COUNTERS.items():
        v = _int(base / sub / file)
        if v is None and name in _BYTES_FALLBACK:
            sub, file = _BYTES_FALLBACK[name]
            v, factor = _int(base / sub / file), 1
        if v is not None:
            out[name] = v * factor
    return out
