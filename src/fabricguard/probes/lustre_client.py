"""The Lustre client's own health, read from the node: the one reader of its procfs/sysfs/debugfs files and of
``lnetctl``'s YAML, and the checks that turn them into ``FabricReady`` (pools that mount Lustre).

A mount that exists proves little: a client whose imports are DISCONN, that was evicted ("Cannot send after
transport endpoint shutdown", aws-fsx-csi-driver #169) or whose LNet peers are unhealthy still shows the mount
and hangs every job that touches it. The Lustre wiki's health list (https://wiki.lustre.org/Lustre_Health_Checks)
names what to read; the formats are Lustre's own (lustre-release, read at c881f8e, 2026-08):

- ``health_check`` (``/sys/fs/lustre/health_check``; ``/proc/fs/lustre`` before 2.12): ``healthy``,
  ``NOT HEALTHY`` or ``LBUG`` (``obdclass/obd_sysfs.c``);
- each OSC/MDC ``import`` (debugfs ``/sys/kernel/debug/lustre/{osc,mdc}/<dev>/`` since 2.15, procfs before): a
  YAML block whose ``state:`` is one of CLOSED, NEW, DISCONN, CONNECTING, REPLAY, REPLAY_LOCKS, REPLAY_WAIT,
  RECOVER, FULL, EVICTED, IDLE (``lustre_import.h``), and ``current_connection: "<nid>"``
  (``lprocfs_import_seq_show`` in ``obdclass/lprocfs_status.c``). IDLE is an import the client disconnected on
  purpose after ``idle_timeout`` (2.12+): healthy, it reconnects on the next RPC;
- each ``state`` file: ``current_state:`` and ``state_history:`` lines `` - [ <unix seconds>, <STATE> ]``
  (``lprocfs_state_seq_show``): an ``EVICTED`` entry is an eviction, with its time;
- ``lnetctl net show -v 3`` and ``lnetctl peer show -v 3``: ``net:`` / ``local NI(s):`` items with ``nid``,
  ``status`` and ``health stats: {health value}``; ``peer:`` items with ``primary nid`` and ``peer ni:`` items with
  ``nid``, ``state`` and ``health stats: {health value}`` (``lnet/utils/lnetconfig/liblnetconfig.c``). A health
  value below 1000 (``LNET_MAX_HEALTH_VALUE``) means LNet saw failures on that interface or peer and is routing
  around it.

Every file is read through the probes' guarded reader (a FIFO, a device or an endless file is refused before it
is opened); ``lnetctl`` runs under a deadline with its output capped.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from fabricguard import names
from fabricguard.probes.result import Check, Status
from fabricguard.times import format_time
from fabricguard.userfiles import SourceError, read_attribute, read_bytes

# Newest layout first: 2.15+ moved import/state to debugfs; older clients keep them in procfs.
LUSTRE_DIRS = ("sys/kernel/debug/lustre", "proc/fs/lustre", "sys/fs/lustre")
HEALTH_FILES = ("sys/fs/lustre/health_check", "proc/fs/lustre/health_check")
MAX_HEALTH = 1000  # LNET_MAX_HEALTH_VALUE
CONNECTED = ("FULL", "IDLE")
MAX_FILE = 1024 * 1024
MAX_LNETCTL_OUTPUT = 16 * 1024 * 1024
LNETCTL_TIMEOUT = 10.0
LNET_SNAPSHOT_MAX_AGE = 300.0  # the sidecar writes every 30 s: ten missed writes and its snapshot is not trusted

_STAT = re.compile(r"^(\S+)\s+(\d+)\s+samples\s+\[(\w+)\](?:\s+(\d+)\s+(\d+)\s+(\d+))?")
_IMPORT_STATE = re.compile(r"^\s*state:\s*(\S+)", re.M)
_CONNECTION = re.compile(r"^\s*current_connection:\s*\"?([^\"\s]+)\"?", re.M)
_HISTORY = re.compile(r"^\s*-\s*\[\s*(\d{1,12})\s*,\s*([A-Z_]+)\s*\]")
_DEVICE = re.compile(r"^(?P<target>(?P<fs>[A-Za-z0-9_]{1,8})-(?:OST|MDT)[0-9a-f]{4})-(?:osc|mdc)-[0-9a-f]+$")


# ------------------------------------------------------------------------------------------------ parsers


@dataclass(frozen=True)
class StatLine:
    name: str
    samples: int
    unit: str
    total: int | None  # the sum column, when the stat has one


def parse_stats(text: str) -> dict[str, StatLine]:
    """A Lustre ``stats`` file: ``name N samples [unit] min max sum [sumsq]`` per line."""
    out = {}
    for line in text.splitlines():
        m = _STAT.match(line)
        if m:
            out[m.group(1)] = StatLine(m.group(1), int(m.group(2)), m.group(3),
                                       int(m.group(6)) if m.group(6) is not None else None)
    return out


def parse_import_state(text: str) -> str | None:
    m = _IMPORT_STATE.search(text)
    return m.group(1) if m else None


def parse_state_history(text: str) -> list[tuple[int, str]]:
    """(unix seconds, state) of each ``state_history`` entry, oldest first as Lustre prints them."""
    return [(int(m.group(1)), m.group(2)) for m in map(_HISTORY.match, text.splitlines()) if m]


def target_of(device: str) -> str:
    """``lustre-OST0001-osc-ffff8d2c3a4b5000`` -> ``lustre-OST0001``; llite ``lustre-ffff8d...`` -> ``lustre``."""
    return re.sub(r"-(?:osc|mdc)?-?ffff[0-9a-f]+$", "", device)


def fsname_of(device: str) -> str | None:
    m = _DEVICE.match(device)
    return m.group("fs") if m else None


@dataclass(frozen=True)
class LnetInterface:
    """One local NI (``net show``) or one peer NI (``peer show``)."""

    nid: str
    status: str | None  # NI: up/down; peer NI: its state (up, down, NA)
    health: int | None
    peer: str | None = None  # the peer's primary nid (peer NIs only)


def _items(doc: Any, key: str) -> list[dict[str, Any]]:
    seq = doc.get(key) if isinstance(doc, dict) else None
    return [i for i in seq if isinstance(i, dict)] if isinstance(seq, list) else []


def _health(item: dict[str, Any]) -> int | None:
    hs = item.get("health stats")
    v = hs.get("health value") if isinstance(hs, dict) else None
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 10**9 else None


def parse_lnet_nets(text: str) -> list[LnetInterface]:
    """Local NIs from ``lnetctl net show -v 3`` YAML (``lo`` left out: it has no health to lose)."""
    out = []
    for net in _items(yaml.safe_load(text), "net"):
        if str(net.get("net type")) == "lo":
            continue
        for ni in _items(net, "local NI(s)"):
            out.append(LnetInterface(str(ni.get("nid")), _str(ni.get("status")), _health(ni)))
    return out


def parse_lnet_peers(text: str) -> list[LnetInterface]:
    """Peer NIs from ``lnetctl peer show -v 3`` YAML."""
    out = []
    for peer in _items(yaml.safe_load(text), "peer"):
        primary = str(peer.get("primary nid"))
        for ni in _items(peer, "peer ni"):
            out.append(LnetInterface(str(ni.get("nid")), _str(ni.get("state")), _health(ni), primary))
    return out


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


# ------------------------------------------------------------------------------------------------ readers


def _read(p: Path) -> tuple[str | None, str]:
    """(text, "") or (None, why), at most MAX_FILE bytes (``userfiles.read_attribute``)."""
    return read_attribute(p, MAX_FILE)


@dataclass(frozen=True)
class Import:
    """One OSC or MDC of the client: what its ``import`` and ``state`` files say."""

    kind: str  # osc | mdc
    device: str
    target: str
    fsname: str | None
    path: Path
    state: str | None
    state_line: str | None
    connection: str | None
    history: tuple[tuple[int, str], ...] = ()
    why: str = ""  # why the import file could not be read


def read_imports(root: Path) -> list[Import]:
    """Every OSC/MDC import below ``root``, once each (the newest layout that has it wins)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for d in LUSTRE_DIRS:
        for kind in ("osc", "mdc"):
            base = root / d / kind
            try:
                entries = sorted(base.iterdir()) if base.is_dir() else []
            except OSError:
                continue
            for obj in entries:
                if (kind, obj.name) in seen or not (obj / "import").exists():
                    continue
                seen.add((kind, obj.name))
                text, why = _read(obj / "import")
                state = parse_import_state(text) if text else None
                line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip().startswith("state:")), None)
                conn = _CONNECTION.search(text) if text else None
                hist_text, _ = _read(obj / "state")
                out.append(Import(kind, obj.name, target_of(obj.name), fsname_of(obj.name), obj / "import", state,
                                  line, conn.group(1) if conn else None,
                                  tuple(parse_state_history(hist_text or "")), why))
    return out


def read_health_check(root: Path) -> tuple[str | None, str]:
    """(the health_check text, the file) or (None, why it could not be read)."""
    whys = []
    for rel in HEALTH_FILES:
        p = root / rel
        if not p.exists():
            continue
        text, why = _read(p)
        if text is not None:
            return text, str(p)
        whys.append(f"{p}: {why}")
    return None, "; ".join(whys) or f"no {' or '.join(str(root / r) for r in HEALTH_FILES)}"


@dataclass
class Lnetctl:
    """Runs ``lnetctl`` (``argv`` is the command before ``net show``, e.g. ``nsenter -t 1 -m -- lnetctl``),
    bounded in time and output. ``None`` argv: not available here, and the LNet check says so.

    ``directory``: read what the agent's ``lnet`` sidecar wrote instead (``dir:PATH``): ``net.yaml`` and
    ``peer.yaml`` (``lnetctl <what> show -v 3``), or ``<what>.err`` saying why it could not; a file older than
    ``max_age`` seconds is not trusted (the sidecar stopped). ``lnetctl`` needs ``CAP_SYS_ADMIN`` on
    ``/dev/lnet`` (libcfs ``libcfs_psdev_ioctl``), so only the sidecar is privileged, never the agent."""

    argv: list[str] | None
    timeout: float = LNETCTL_TIMEOUT
    max_output: int = MAX_LNETCTL_OUTPUT
    calls: int = field(default=0, compare=False)
    directory: Path | None = None
    max_age: float = LNET_SNAPSHOT_MAX_AGE

    @classmethod
    def from_option(cls, value: str | None) -> Lnetctl:
        """``auto`` (the default): ``lnetctl`` on PATH if there is one; ``none``: never; ``dir:PATH``: the
        sidecar's snapshots in PATH; else a command line."""
        if value in (None, "", "none"):
            return cls(None)
        if value == "auto":
            found = shutil.which("lnetctl")
            return cls([found] if found else None)
        if value.startswith("dir:"):
            return cls(None, directory=Path(value[4:]))
        return cls(shlex.split(value))

    def _snapshot(self, what: str, now: float | None = None) -> tuple[str | None, str]:
        assert self.directory is not None
        self.calls += 1
        f = self.directory / f"{what}.yaml"
        err = self.directory / f"{what}.err"
        if not f.exists():
            said, _ = _read(err) if err.exists() else (None, "")
            return None, (f"the lnet sidecar could not run lnetctl: {' '.join((said or '').split())[:300]}" if said
                          else f"no {f} yet: the lnet sidecar has not written it (is it running?)")
        try:
            age = (time.time() if now is None else now) - f.stat().st_mtime
        except OSError as exc:
            return None, f"cannot read {f}: {exc.strerror or exc}"
        if age > self.max_age:
            return None, f"{f} is {age:.0f} s old (over {self.max_age:.0f} s): the lnet sidecar stopped writing it"
        try:
            return read_bytes(f, max_bytes=self.max_output).decode("utf-8", errors="replace"), ""
        except SourceError as exc:
            return None, f"{f}: {exc.problem}"
        except OSError as exc:
            return None, f"cannot read {f}: {exc.strerror or exc}"

    def show(self, what: str) -> tuple[str | None, str]:
        """(YAML text, "") of ``lnetctl <what> show -v 3``, or (None, why)."""
        if self.directory is not None:
            return self._snapshot(what)
        if not self.argv:
            return None, "lnetctl is not available to the agent (--lnetctl)"
        self.calls += 1
        cmd = [*self.argv, what, "show", "-v", "3"]
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as exc:
            return None, f"cannot run {shlex.join(cmd)}: {exc.strerror or exc}"
        assert proc.stdout is not None
        deadline = time.monotonic() + self.timeout
        chunks: list[bytes] = []
        size = 0
        why = ""
        os.set_blocking(proc.stdout.fileno(), False)
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    why = f"{shlex.join(cmd)} did not finish within {self.timeout:g} s"
                    break
                ready, _, _ = select.select([proc.stdout], [], [], min(left, 0.2))
                if not ready:
                    if proc.poll() is not None:
                        break
                    continue
                chunk = proc.stdout.read(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > self.max_output:
                    why = f"{shlex.join(cmd)} printed more than {self.max_output // 2**20} MiB"
                    break
        finally:
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.stdout.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=2)
        if why:
            return None, why
        if proc.returncode not in (0, None):
            return None, f"{shlex.join(cmd)} exited {proc.returncode}"
        return b"".join(chunks).decode("utf-8", errors="replace"), ""


# ------------------------------------------------------------------------------------------------- checks


@dataclass(frozen=True)
class ClientHealthPolicy:
    """What counts as healthy: evictions within ``eviction_window`` seconds fail; LNet health below
    ``min_health`` fails (1000 is LNet's maximum: any recorded failure)."""

    eviction_window: float = 3600.0
    min_health: int = MAX_HEALTH


def health_check_check(root: Path) -> Check:
    text, where = read_health_check(root)
    if text is None and not any((root / r).exists() for r in HEALTH_FILES):
        return Check("lustre.health", Status.failed, f"no Lustre client here ({where}): the lustre module is not "
                     "loaded or the host's /sys is not visible to the agent", {"file": None})
    if text is None:
        return Check("lustre.health", Status.failed, f"cannot read the client's health_check ({where}): whether "
                     "the Lustre client is healthy is unknown", {"error": True})
    first = text.splitlines()[0].strip() if text else ""
    ok = first == "healthy"
    return Check("lustre.health", Status.passed if ok else Status.failed,
                 f"{where}: {first!r}" + ("" if ok else " (Lustre reports a device unhealthy or an LBUG: the client "
                                          "needs attention before jobs use it)"),
                 {"line": first, "file": where})


def _client_imports(root: Path, fsname: str | None) -> tuple[list[Import], list[Import]]:
    every = read_imports(root)
    mine = [i for i in every if fsname is None or i.fsname == fsname]
    return every, mine


def imports_check(root: Path, fsname: str | None) -> Check:
    every, mine = _client_imports(root, fsname)
    fs = f"file system {fsname}" if fsname else "the mounted file system"
    if not mine:
        seen = sorted({i.fsname or i.device for i in every})
        return Check("lustre.imports", Status.failed,
                     f"no OSC/MDC import of {fs} below {root} ({', '.join(LUSTRE_DIRS)})"
                     + (f"; imports seen: {', '.join(seen)}" if seen else "")
                     + ": the client is not connected to it", {"imports": 0})
    bad = [i for i in mine if i.state not in CONNECTED]
    kinds = {i.kind for i in mine}
    missing = sorted({"osc", "mdc"} - kinds)
    data: dict[str, Any] = {"imports": len(mine), "states": {i.target: i.state for i in mine}}
    if bad or missing:
        parts = [f"{i.target}: {i.state_line or 'unreadable (' + i.why + ')'} ({i.path})" for i in bad[:8]]
        if len(bad) > 8:
            parts.append(f"and {len(bad) - 8} more")
        if missing:
            parts.append(f"no {'/'.join(m.upper() for m in missing)} import at all")
        return Check("lustre.imports", Status.failed,
                     f"{len(bad)} of {len(mine)} imports of {fs} not connected: " + "; ".join(parts), data)
    return Check("lustre.imports", Status.passed,
                 f"{len(mine)} imports of {fs} connected (FULL or IDLE)", data)


def evictions_check(root: Path, fsname: str | None, policy: ClientHealthPolicy, now: float) -> Check:
    _, mine = _client_imports(root, fsname)
    since = now - policy.eviction_window
    hits = sorted(((ts, i.target) for i in mine for ts, st in i.history if st == "EVICTED" and ts >= since),
                  reverse=True)
    window = f"{policy.eviction_window / 60:g} min"
    if hits:
        shown = "; ".join(f"{t} evicted at {format_time(datetime.fromtimestamp(ts, UTC))} "
                          f"(state_history: [ {ts}, EVICTED ])" for ts, t in hits[:4])
        return Check("lustre.evictions", Status.failed,
                     f"{len(hits)} eviction(s) in the last {window}: {shown}. An evicted client loses its locks and "
                     "dirty pages: jobs see EIO/ESHUTDOWN ('Cannot send after transport endpoint shutdown')",
                     {"evictions": len(hits)})
    return Check("lustre.evictions", Status.passed, f"no eviction in the last {window} ({len(mine)} imports read)",
                 {"evictions": 0})


def lnet_check(root: Path, fsname: str | None, lnetctl: Lnetctl, policy: ClientHealthPolicy) -> Check:
    nets_text, why = lnetctl.show("net")
    if nets_text is None:
        return Check("lustre.lnet", Status.skipped, f"LNet health not read: {why}. Imports and evictions are "
                     "still checked; give the agent lnetctl (docs/storage.md) to check NI and peer health")
    try:
        nis = parse_lnet_nets(nets_text)
    except yaml.YAMLError as exc:
        return Check("lustre.lnet", Status.failed, f"lnetctl net show printed no YAML: {str(exc).splitlines()[0]}",
                     {"error": True})
    peers_text, why = lnetctl.show("peer")
    try:
        peers = parse_lnet_peers(peers_text) if peers_text is not None else []
    except yaml.YAMLError:
        peers, why = [], "lnetctl peer show printed no YAML"
    # The peers that matter are the file system's servers: the nids its imports are connected to.
    _, mine = _client_imports(root, fsname)
    servers = {i.connection for i in mine if i.connection}
    relevant = [p for p in peers if not servers or p.nid in servers or p.peer in servers]
    bad = [f"local NI {n.nid}: status {n.status}" for n in nis if n.status not in (None, "up")]
    bad += [f"local NI {n.nid}: health value {n.health}" for n in nis if n.health is not None
            and n.health < policy.min_health]
    bad += [f"peer {p.nid}" + (f" (of {p.peer})" if p.peer and p.peer != p.nid else "") + f": health value {p.health}"
            for p in relevant if p.health is not None and p.health < policy.min_health]
    bad += [f"peer {p.nid}: state {p.status}" for p in relevant if p.status == "down"]
    data = {"nis": len(nis), "peers": len(relevant), "bad": bad[:16]}
    if not nis:
        return Check("lustre.lnet", Status.failed, "lnetctl net show lists no LNet interface besides lo: LNet is "
                     "not configured", data)
    if bad:
        return Check("lustre.lnet", Status.failed, f"LNet unhealthy (health below {policy.min_health} means LNet "
                     "recorded failures and routes around them): " + "; ".join(bad[:6])
                     + (f"; and {len(bad) - 6} more" if len(bad) > 6 else ""), data)
    peer_note = (f"{len(relevant)} server peer NIs" if peers_text is not None else f"peers not read ({why})")
    return Check("lustre.lnet", Status.passed if peers_text is not None else Status.degraded,
                 f"{len(nis)} local NIs up at health {policy.min_health}; {peer_note}"
                 + (" healthy" if peers_text is not None else ""), data)


def jobid_check(root: Path) -> Check:
    """Whether this client tags each request with the job (``jobid_var`` naming the variable the webhook sets):
    a missing tag costs per-job I/O figures on the servers, not readiness, so it is at most ``degraded``."""
    p = root / "sys/fs/lustre/jobid_var"
    if not p.exists():
        return Check("lustre.jobid", Status.skipped, f"no {p}: this client cannot tag requests per job")
    text, why = _read(p)
    if text is None:
        return Check("lustre.jobid", Status.degraded, f"cannot read {p}: {why}", {"error": True})
    value = text.splitlines()[0].strip() if text else ""
    if value == names.LUSTRE_JOBID_ENV:
        return Check("lustre.jobid", Status.passed, f"jobid_var is {value}: requests carry <namespace>.<job>",
                     {"jobid_var": value})
    return Check("lustre.jobid", Status.degraded,
                 f"jobid_var is {value!r}, not {names.LUSTRE_JOBID_ENV}: the file system's job_stats cannot tell "
                 f"this node's jobs apart (lctl set_param -P jobid_var={names.LUSTRE_JOBID_ENV} on the MGS)",
                 {"jobid_var": value})


def client_checks(root: Path, fsname: str | None, lnetctl: Lnetctl, policy: ClientHealthPolicy | None = None,
                  now: float | None = None) -> list[Check]:
    """Every client-health check for a node that mounts ``fsname`` (None: whatever imports the client has)."""
    p = policy or ClientHealthPolicy()
    t = time.time() if now is None else now
    return [health_check_check(root), imports_check(root, fsname), evictions_check(root, fsname, p, t),
            lnet_check(root, fsname, lnetctl, p), jobid_check(root)]


def fsname_from_source(source: str) -> str | None:
    """``10.1.0.5@tcp:/lfsfs`` (a Lustre mount's source) -> ``lfsfs``; a subdirectory mount keeps the first part."""
    if ":/" not in source:
        return None
    name = source.split(":/", 1)[1].split("/", 1)[0]
    return name or None
