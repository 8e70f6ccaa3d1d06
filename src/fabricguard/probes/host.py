"""Host probe: is this node ready for a pool? RDMA links, kernel modules, libraries, GPUs, the Lustre mount.

Everything is read below a configurable root (default ``/``), so the node agent reads the real node and tests
read realistic fake trees. ``host_checks`` is the one list of host checks: ``probe host`` reports it and the
node agent (``fabricguard.agent``) turns it into the node's ``FabricReady`` condition. Which checks apply
depends on the pool's fabric; a check that applies and whose
data cannot be read FAILS with the reason (a missing /sys/class/infiniband is not "no problem found").

Assumptions, stated: RDMA fabrics (infiniband, roce, gke-rdma) use NVIDIA ConnectX NICs (mlx5_ib); GPUDirect
RDMA needs nvidia_peermem, reported as ``degraded`` when absent because a DMA-BUF set-up (open kernel modules)
also provides it and this probe does not verify that path.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricguard import fabrics
from fabricguard.probes.lustre_client import Lnetctl
from fabricguard.probes.result import Check, Status, overall
from fabricguard.profile import PlatformProfile, Pool
from fabricguard.userfiles import SourceError, read_attribute, read_json

# Where node images put shared libraries and the NCCL net plugins (relative to the root): the usual places, then
# each fabric's own (fabricguard/fabrics/<type>.py lib_dirs).
LIB_DIRS = [
    "lib",
    "lib64",
    "usr/lib",
    "usr/lib64",
    "lib/x86_64-linux-gnu",
    "usr/lib/x86_64-linux-gnu",
    "lib/aarch64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "usr/local/lib",
    "usr/local/lib64",
    "usr/local/nvidia/lib64",
    *fabrics.lib_dirs(),
]


@dataclass
class HostReport:
    pool: str
    fabric: str
    root: str
    status: Status
    checks: list[Check] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return {Status.passed: "ready", Status.degraded: "degraded"}.get(self.status, "not ready")

    def to_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "fabric": self.fabric,
            "root": self.root,
            "status": str(self.status),
            # "verdict" is the key of a command's overall answer; a pool's part is its readiness.
            "readiness": self.verdict,
            "failed": [c.to_dict() for c in self.checks if c.status in (Status.failed, Status.degraded)],
            "checks": [c.to_dict() for c in self.checks],
        }


# ------------------------------------------------------------------------------------------------ readers


# A sysfs attribute is at most one page; /proc/modules and a mount table are far below these. A node root is
# the host's, but a hostile or broken one may hold a FIFO, a link to /dev/zero or a sparse 1 GiB file where an
# attribute should be: each is refused before it is opened (userfiles.read_bytes), never read.
MAX_ATTRIBUTE = 64 * 1024
MAX_TABLE = 16 * 1024**2


def read_small(p: Path, max_bytes: int = MAX_ATTRIBUTE) -> str | None:
    """The text of a sysfs/procfs file below the root, stripped; None when it is missing, not a regular file,
    larger than ``max_bytes`` or unreadable (the checks then fail naming it)."""
    return read_small_why(p, max_bytes)[0]


def read_small_why(p: Path, max_bytes: int = MAX_ATTRIBUTE) -> tuple[str | None, str]:
    """(text or None, why it is None): :func:`read_small` with the reason a check can quote."""
    return read_attribute(p, max_bytes)


_read = read_small


def list_dir(d: Path) -> tuple[list[Path], str]:
    """(sorted entries, "") or ([], why) when ``d`` cannot be listed; never raises."""
    try:
        return sorted(d.iterdir()), ""
    except OSError as exc:
        return [], f"{d}: cannot list: {exc.strerror or exc}"


def parse_modules(text: str) -> dict[str, str]:
    """/proc/modules -> {module: state}; state is Live, Loading or Unloading."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 5:
            out[parts[0]] = parts[4]
    return out


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")


@dataclass
class RdmaPort:
    device: str
    port: str
    state: str | None
    phys_state: str | None
    link_layer: str | None
    rate: str | None
    netdevs: list[str]
    error: str = ""  # why the port could not be read, when it could not

    @property
    def rate_gbps(self) -> float | None:
        m = _RATE.match(self.rate or "")
        return float(m.group(1)) if m else None

    @property
    def active(self) -> bool:
        return bool(self.state and "ACTIVE" in self.state and self.phys_state and "LinkUp" in self.phys_state)


def read_rdma(root: Path) -> tuple[bool, list[RdmaPort]]:
    """(whether /sys/class/infiniband exists, one entry per device port).

    A device or ``ports`` directory that cannot be listed is one entry with ``error`` set (the checks fail
    naming it); only an unlistable /sys/class/infiniband itself raises ``OSError``.
    """
    base = root / "sys/class/infiniband"
    if not base.is_dir():
        return False, []
    ports: list[RdmaPort] = []
    for dev in sorted(base.iterdir()):
        nd = dev / "device/net"
        netdevs = [p.name for p in list_dir(nd)[0]] if nd.is_dir() else []
        pdir = dev / "ports"
        if not pdir.is_dir():
            ports.append(RdmaPort(dev.name, "?", None, None, None, None, netdevs, f"{pdir}: no ports directory"))
            continue
        entries, why = list_dir(pdir)
        if why:
            ports.append(RdmaPort(dev.name, "?", None, None, None, None, netdevs, why))
        for port in entries:
            ports.append(
                RdmaPort(
                    device=dev.name,
                    port=port.name,
                    state=_read(port / "state"),
                    phys_state=_read(port / "phys_state"),
                    link_layer=_read(port / "link_layer"),
                    rate=_read(port / "rate"),
                    netdevs=netdevs,
                )
            )
    return True, ports


def nearest_nics(root: Path, gpu_pci: str) -> list[str]:
    """The RDMA NICs nearest a GPU on the PCIe tree (``/sys/bus/pci/devices/<gpu_pci>`` against each
    ``/sys/class/infiniband/<dev>/device``): the ones whose device path shares the longest prefix with the GPU's,
    which on a rail-optimized node (one NIC per GPU behind the same PCIe switch) is the GPU's own NIC, the one
    NCCL gives its traffic. Several when they tie (two NICs behind one switch); empty when nothing is readable."""
    gpu = root / "sys/bus/pci/devices" / gpu_pci
    base = root / "sys/class/infiniband"
    try:
        gparts = gpu.resolve(strict=True).parts
        devs = sorted(base.iterdir()) if base.is_dir() else []
    except OSError:
        return []
    best, names = 0, []
    for dev in devs:
        try:
            parts = (dev / "device").resolve(strict=True).parts
        except OSError:
            continue
        common = 0
        for a, b in zip(gparts, parts, strict=False):
            if a != b:
                break
            common += 1
        if common > best:
            best, names = common, [dev.name]
        elif common == best and common:
            names.append(dev.name)
    # Sharing only /sys/devices (or a PCI root complex with everything else) is no nearness at all.
    return names if best > len(Path(root, "sys/devices").resolve().parts) + 1 else []


def nic_pci(root: Path, name: str) -> str | None:
    """The PCI address of RDMA device ``name`` (``0000:1b:00.0``): what a DRA driver's ResourceSlice lists it by
    (``dra.net/pciAddress``, ``resource.kubernetes.io/pciBusID``)."""
    try:
        return (root / "sys/class/infiniband" / name / "device").resolve(strict=True).name
    except OSError:
        return None


def library_dirs(root: Path) -> list[Path]:
    dirs = [root / d for d in LIB_DIRS]
    for conf in sorted((root / "etc/ld.so.conf.d").glob("*.conf")):
        for line in (_read(conf) or "").splitlines():
            line = line.strip()
            if line.startswith("/") and not line.startswith("#"):
                dirs.append(root / line.lstrip("/"))
    if root == Path("/"):
        dirs += [Path(d) for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    return list(dict.fromkeys(dirs))


def find_library(root: Path, patterns: list[str]) -> list[str]:
    hits: list[str] = []
    for d in library_dirs(root):
        for pat in patterns:
            hits += sorted(glob.glob(str(d / pat)))
    return list(dict.fromkeys(hits))


# ------------------------------------------------------------------------------------------------- GPUs


def _nvml_value(fn: Any, *args: Any) -> Any:
    try:
        v = fn(*args)
    except Exception as e:  # NVML raises per-feature NotSupported errors; record them like the fixture
        return f"error: {type(e).__name__}: {e}"
    if isinstance(v, bytes):
        return v.decode()
    return v


def collect_nvml() -> dict[str, Any]:
    """Read the GPUs through NVML (nvidia-ml-py, imported lazily) into the recorded nvml.json shape."""
    import pynvml as n  # type: ignore[import-not-found,import-untyped,unused-ignore]

    n.nvmlInit()
    try:
        gpus = []
        for i in range(n.nvmlDeviceGetCount()):
            h = n.nvmlDeviceGetHandleByIndex(i)
            ecc = _nvml_value(n.nvmlDeviceGetEccMode, h)
            rows = _nvml_value(n.nvmlDeviceGetRemappedRows, h)
            retired = _nvml_value(n.nvmlDeviceGetRetiredPages, h, n.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
            gpus.append(
                {
                    "index": i,
                    "name": _nvml_value(n.nvmlDeviceGetName, h),
                    "uuid": _nvml_value(n.nvmlDeviceGetUUID, h),
                    "ecc_mode_current": ecc[0] if isinstance(ecc, (list, tuple)) else ecc,
                    "ecc_uncorrected_volatile": _nvml_value(
                        n.nvmlDeviceGetTotalEccErrors, h, n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, n.NVML_VOLATILE_ECC
                    ),
                    "remapped_rows": str(list(rows)) if isinstance(rows, (list, tuple)) else rows,
                    "retired_pages_dbe": len(retired) if isinstance(retired, (list, tuple)) else retired,
                    "retired_pages_pending": _nvml_value(n.nvmlDeviceGetRetiredPagesPendingStatus, h),
                }
            )
        return {"driver": _nvml_value(n.nvmlSystemGetDriverVersion), "gpus": gpus}
    finally:
        n.nvmlShutdown()


def read_nvml_json(path: Path) -> dict[str, Any]:
    """Recorded NVML data (``{"driver": ..., "gpus": [{"index": 0, "name": ..., ...}]}``); ``SourceError``
    names the file and what is wrong with its shape, so a wrong file is refused instead of judged."""
    data = read_json(path, max_bytes=64 * 1024**2, what="; pass recorded NVML data")
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
        raise SourceError(str(path), None, 'not recorded NVML data: expected an object with a "gpus" list')
    for i, g in enumerate(data["gpus"]):
        if not isinstance(g, dict):
            raise SourceError(str(path), None, f"gpus[{i}] is {type(g).__name__}, not an object")
        for key, value in g.items():
            if isinstance(value, dict):
                raise SourceError(str(path), None, f"gpus[{i}].{key} is an object; expected a number or text")
    return data


def load_gpus(nvml_json: Path | None) -> tuple[dict[str, Any] | None, str]:
    """(GPU data, where it came from or why there is none); a bad ``nvml_json`` raises ``SourceError``."""
    if nvml_json is not None:
        return read_nvml_json(nvml_json), f"recorded NVML data {nvml_json}"
    try:
        return collect_nvml(), "NVML"
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install 'fabricguard[probe]')"
    except Exception as e:
        return None, f"NVML is not usable here ({type(e).__name__}: {e}): no NVIDIA driver or GPU"


def _ints(v: Any) -> list[int] | None:
    if isinstance(v, (list, tuple)):
        return [int(x) for x in v]
    if isinstance(v, str) and not v.startswith("error"):
        return [int(x) for x in re.findall(r"-?\d+", v)]
    return None


def gpu_checks(pool: Pool, data: dict[str, Any] | None, source: str, require: bool) -> list[Check]:
    if data is None:
        st = Status.failed if require else Status.skipped
        why = source if require else f"{source}; the local profile does not require GPUs"
        return [Check("gpu.count", st, why)]
    gpus = data.get("gpus", [])
    checks = []
    n, want = len(gpus), pool.gpusPerNode
    checks.append(
        Check(
            "gpu.count",
            Status.passed if n == want else (Status.failed if n < want else Status.degraded),
            f"{n} GPU(s) via {source}; pool {pool.name} expects gpusPerNode={want}",
            {"found": n, "expected": want, "names": [g.get("name") for g in gpus]},
        )
    )
    bad_ecc, bad_mem, no_data = [], [], []
    for g in gpus:
        i = g.get("index")
        mode, unc = g.get("ecc_mode_current"), g.get("ecc_uncorrected_volatile")
        if not isinstance(mode, int) or not isinstance(unc, int):
            no_data.append(f"GPU {i}: ECC state unreadable ({mode!r}, {unc!r})")
        elif mode != 1:
            bad_ecc.append(f"GPU {i}: ECC is off")
        elif unc > 0:
            bad_ecc.append(f"GPU {i}: {unc} uncorrected ECC errors since boot")
        rows = _ints(g.get("remapped_rows"))
        retired = g.get("retired_pages_dbe")
        if rows is not None and len(rows) >= 4:
            _corr, unc_rows, pending, failure = rows[:4]
            if failure:
                bad_mem.append(f"GPU {i}: row remapping failed (the GPU needs service)")
            elif pending:
                bad_mem.append(f"GPU {i}: a row remap is pending (reset the GPU)")
            elif unc_rows:
                bad_mem.append(f"GPU {i}: {unc_rows} rows remapped for uncorrectable errors")
        elif isinstance(retired, int):
            if retired or g.get("retired_pages_pending") in (1, True):
                bad_mem.append(f"GPU {i}: {retired} pages retired for double-bit errors")
        else:
            no_data.append(f"GPU {i}: neither remapped rows nor retired pages readable")
    checks.append(
        Check(
            "gpu.ecc",
            Status.failed if bad_ecc or any("ECC" in x for x in no_data) else Status.passed,
            "; ".join(bad_ecc + [x for x in no_data if "ECC" in x]) or "ECC on, no uncorrected errors",
        )
    )
    mem_missing = [x for x in no_data if "ECC" not in x]
    checks.append(
        Check(
            "gpu.memory",
            Status.failed if bad_mem or mem_missing else Status.passed,
            "; ".join(bad_mem + mem_missing) or "no pending or failed row remaps, no retired pages",
        )
    )
    if not gpus:
        return checks[:1]
    return checks


# ------------------------------------------------------------------------------------------------ checks


def rdma_checks(pool: Pool, root: Path) -> list[Check]:
    f = pool.fabric
    spec = f.spec
    if not spec.rdma_verbs:
        if spec.device_class is not None:
            return [device_class_check(spec.type, spec.device_class, root)]
        why = "no RDMA" if not spec.has_fabric else f"{f.type} does not use RDMA verbs"
        return [Check("rdma.devices", Status.skipped, f"fabric {f.type}: {why}")]
    exists, ports = read_rdma(root)
    if not exists:
        return [
            Check(
                "rdma.devices",
                Status.failed,
                f"{root / 'sys/class/infiniband'} does not exist: no RDMA device (ib_core not loaded or no NIC)",
            )
        ]
    devices = sorted({p.device for p in ports})
    if not devices:
        return [Check("rdma.devices", Status.failed, "/sys/class/infiniband is empty: no RDMA device on this node")]
    checks = []
    wanted = f.hcas or devices
    missing = [h for h in f.hcas if h not in devices]
    checks.append(
        Check(
            "rdma.devices",
            Status.failed if missing else Status.passed,
            (f"HCAs {missing} named by the pool are absent; present: {devices}" if missing else f"{devices}"),
            {"devices": devices},
        )
    )
    problems = []
    want_ll = spec.link_layer
    for p in ports:
        if p.device not in wanted:
            continue
        where = f"{p.device}/{p.port}"
        if p.error:
            problems.append(f"{where}: {p.error}")
            continue
        if p.state is None or p.phys_state is None or p.link_layer is None or p.rate is None:
            unreadable = [n for n in ("state", "phys_state", "link_layer", "rate") if getattr(p, n) is None]
            why = read_small_why(root / "sys/class/infiniband" / p.device / "ports" / p.port / unreadable[0])[1]
            problems.append(f"{where}: {', '.join(unreadable)} unreadable ({unreadable[0]} {why})")
            continue
        if not p.active:
            problems.append(f"{where}: {p.state} / {p.phys_state}")
        if want_ll and p.link_layer != want_ll:
            problems.append(f"{where}: link layer {p.link_layer}, fabric {f.type} needs {want_ll}")
        if p.rate_gbps is None:
            problems.append(f"{where}: rate {p.rate!r} unreadable")
    rates = sorted({p.rate for p in ports if p.device in wanted and p.rate})
    checks.append(
        Check(
            "rdma.ports",
            Status.failed if problems else Status.passed,
            "; ".join(problems) or f"every port ACTIVE/LinkUp; rates {', '.join(rates)}",
            {"ports": [p.__dict__ for p in ports if p.device in wanted]},
        )
    )
    if spec.netdevs_required:
        down = []
        for p in ports:
            if p.device not in wanted:
                continue
            if not p.netdevs and f.dra is not None:
                # A DRA driver (DRANET) moves an allocated NIC's netdev into the pod's network namespace: gone from
                # here while a job holds it. The agent's fabric.allocatable check reads the driver's ResourceSlice.
                continue
            if not p.netdevs:
                down.append(f"{p.device}: no netdev (RoCE needs one)")
            for nd in p.netdevs:
                state = _read(root / "sys/class/net" / nd / "operstate")
                if state != "up":
                    down.append(f"{p.device} -> {nd}: operstate {state or 'unreadable'}")
        checks.append(Check("rdma.netdevs", Status.failed if down else Status.passed, "; ".join(down) or "netdevs up"))
    return checks


def device_class_check(fabric: str, device_class: str, root: Path) -> Check:
    """A fabric whose NICs are not verbs devices (Slingshot's cxi): its sysfs class must list at least one."""
    d = root / "sys/class" / device_class
    entries, why = list_dir(d)
    if why:
        return Check("fabric.devices", Status.failed, f"{why}: no {fabric} device (driver not loaded or no NIC)")
    devices = [e.name for e in entries]
    if not devices:
        return Check("fabric.devices", Status.failed, f"{d} is empty: no {fabric} device on this node")
    return Check("fabric.devices", Status.passed, f"{devices}", {"devices": devices})


def module_checks(profile: PlatformProfile | None, pool: Pool, root: Path) -> list[Check]:
    f = pool.fabric
    required: dict[str, str] = dict(f.spec.kernel_modules)
    lustre = _lustre_required(profile, pool)
    if lustre:
        required |= {"lnet": "Lustre networking", "lustre": "Lustre client"}
    gdr = f.spec.peermem_module
    if not required and not gdr:
        return [Check("modules", Status.skipped, f"fabric {f.type} and no Lustre: no kernel module required")]
    text, why = read_small_why(root / "proc/modules", MAX_TABLE)
    if text is None:
        return [Check("modules", Status.failed, f"cannot read {root / 'proc/modules'}: {why}")]
    mods = parse_modules(text)
    missing = [f"{m} ({why})" for m, why in required.items() if mods.get(m) != "Live"]
    checks = [
        Check(
            "modules",
            Status.failed if missing else Status.passed,
            f"missing or not Live: {', '.join(missing)}" if missing else f"loaded: {', '.join(required)}",
            {"required": sorted(required), "loaded": sorted(m for m in required if mods.get(m) == "Live")},
        )
    ]
    if gdr:
        ok = mods.get("nvidia_peermem") == "Live"
        checks.append(
            Check(
                "modules.gpudirect",
                Status.passed if ok else Status.degraded,
                "nvidia_peermem loaded: GPUDirect RDMA possible"
                if ok
                else "nvidia_peermem not loaded: GPUDirect RDMA is off unless DMA-BUF is set up (not verified)",
            )
        )
    return checks


DRIVER_READY = ".driver-ready"  # what the driver container writes once its modules are loaded


def ibverbs_check(pool: Pool, root: Path) -> Check:
    """rdma-core's libibverbs on the host, else in the fabric's driver container root (DOCA/MOFED driver container:
    the host has no rdma-core, the container shares its root at ``/run/mellanox/drivers``); there it counts only
    once the container wrote ``.driver-ready`` (the GPU Operator's MOFED validation waits on the same file)."""
    hits = find_library(root, ["libibverbs.so.1*"])
    if hits:
        return Check("libs.ibverbs", Status.passed, hits[0])
    missing = "libibverbs.so.1 not found (rdma-core): NCCL cannot open any RDMA device"
    where = pool.fabric.spec.driver_container_root
    if where is None:
        return Check("libs.ibverbs", Status.failed, missing)
    droot = root / where.lstrip("/")
    hits = find_library(droot, ["libibverbs.so.1*"]) if droot.is_dir() else []
    if not hits:
        return Check("libs.ibverbs", Status.failed, f"{missing}; nor in a driver container root at {where}")
    if not (droot / DRIVER_READY).is_file():
        return Check("libs.ibverbs", Status.failed, f"{hits[0]} is in the driver container root {where}, which "
                     f"has no {DRIVER_READY}: the DOCA/MOFED driver container has not finished loading",
                     {"driverContainerRoot": where})
    return Check("libs.ibverbs", Status.passed, f"{hits[0]} (the DOCA/MOFED driver container's root {where}, ready)",
                 {"driverContainerRoot": where})


def library_checks(pool: Pool, root: Path) -> list[Check]:
    f = pool.fabric
    checks = []
    if f.spec.rdma_verbs:
        checks.append(ibverbs_check(pool, root))
    patterns = [f"{f.netPlugin}*"] if f.netPlugin else list(f.spec.net_plugin_globs)
    if patterns:
        hits = find_library(root, patterns)
        checks.append(
            Check(
                "libs.net_plugin",
                Status.passed if hits else Status.failed,
                hits[0]
                if hits
                else f"NCCL net plugin ({' or '.join(patterns)}) not found: NCCL_NET={f.effective_nccl_net} fails",
            )
        )
    elif f.has_fabric:
        checks.append(Check("libs.net_plugin", Status.skipped, f"fabric {f.type} uses NCCL's built-in IB transport"))
    if not checks:
        checks.append(Check("libs", Status.skipped, "fabric none: no RDMA library needed"))
    return checks


def _lustre_required(profile: PlatformProfile | None, pool: Pool) -> bool:
    return bool(profile and profile.spec.storage.lustre and pool.lustre)


def lustre_mount_check(profile: PlatformProfile | None, pool: Pool, root: Path) -> Check:
    if not _lustre_required(profile, pool):
        return Check("lustre.mount", Status.skipped, "the profile mounts no Lustre storage in this pool")
    from fabricguard.storage.mountinfo import check_path, parse_mountinfo

    assert profile is not None and profile.spec.storage.lustre is not None
    path = profile.spec.storage.lustre.mountPath
    text, why = read_small_why(root / "proc/self/mountinfo", MAX_TABLE)
    if text is None:
        return Check("lustre.mount", Status.failed, f"cannot read {root / 'proc/self/mountinfo'}: {why}")
    finding = check_path(parse_mountinfo(text), path, "lustre")
    return Check("lustre.mount", Status.passed if finding.ok else Status.failed, finding.message, finding.to_dict())


def lustre_client_checks(profile: PlatformProfile | None, pool: Pool, root: Path,
                         lnetctl: Lnetctl | None = None, now: float | None = None) -> list[Check]:
    """The Lustre client's health (``probes.lustre_client``) on a node that mounts the profile's Lustre: the
    file system is the one mounted at ``mountPath`` (its fsname from the mount's source)."""
    if not _lustre_required(profile, pool):
        return [Check("lustre.client", Status.skipped, "the profile mounts no Lustre storage in this pool")]
    assert profile is not None and profile.spec.storage.lustre is not None
    lus = profile.spec.storage.lustre
    if not lus.clientHealth.enabled:
        return [Check("lustre.client", Status.skipped, "storage.lustre.clientHealth.enabled is false")]
    from fabricguard.probes.lustre_client import ClientHealthPolicy, client_checks, fsname_from_source
    from fabricguard.storage.mountinfo import MountinfoError, find_mount, parse_mountinfo

    fsname = None
    text, _ = read_small_why(root / "proc/self/mountinfo", MAX_TABLE)
    with contextlib.suppress(MountinfoError):
        m = find_mount(parse_mountinfo(text or ""), lus.mountPath)
        if m is not None and m.fstype == "lustre":
            fsname = fsname_from_source(m.source)
    policy = ClientHealthPolicy(float(lus.clientHealth.eviction_window_seconds), lus.clientHealth.minLnetHealth)
    return client_checks(root, fsname, lnetctl or Lnetctl(None), policy, now)


def _guarded(group: str, run: Any) -> list[Check]:
    """Run one group of checks; one that raises (an unreadable sysfs tree, a broken NVML) FAILS, never passes."""
    try:
        return list(run())
    except Exception as e:  # fail closed: whatever went wrong, the group did not prove anything
        return [Check(group, Status.failed, f"check could not run: {type(e).__name__}: {e}", {"error": True})]


CheckGroup = tuple[str, Callable[[], list[Check]]]


def host_check_groups(
    profile: PlatformProfile | None,
    pool: Pool,
    root: Path,
    gpu_data: tuple[dict[str, Any] | None, str],
    require_gpus: bool = True,
    lnetctl: Lnetctl | None = None,
) -> list[CheckGroup]:
    """The host checks as (group name, run) pairs in report order, each run already guarded: a caller that
    must bound the time (the node agent) runs them one by one and can name the group that did not finish."""
    gd, source = gpu_data
    groups: list[tuple[str, Callable[[], Any]]] = [
        ("rdma.devices", lambda: rdma_checks(pool, root)),
        ("modules", lambda: module_checks(profile, pool, root)),
        ("libs", lambda: library_checks(pool, root)),
        ("gpu.count", lambda: gpu_checks(pool, gd, source, require_gpus)),
        ("lustre.mount", lambda: [lustre_mount_check(profile, pool, root)]),
        ("lustre.client", lambda: lustre_client_checks(profile, pool, root, lnetctl)),
    ]
    return [(name, functools.partial(_guarded, name, run)) for name, run in groups]


def host_checks(
    profile: PlatformProfile | None,
    pool: Pool,
    root: Path,
    gpu_data: tuple[dict[str, Any] | None, str],
    require_gpus: bool = True,
) -> list[Check]:
    """Every host check for one pool, in report order; shared by ``probe host`` and the node agent.

    Each group runs guarded: an exception becomes a failed check carrying ``data["error"] = True``, so the
    agent can say "could not check" apart from "checked and found broken".
    """
    return [c for _, run in host_check_groups(profile, pool, root, gpu_data, require_gpus) for c in run()]


def probe_host(
    profile: PlatformProfile | None,
    pool: Pool,
    *,
    root: Path = Path("/"),
    nvml_json: Path | None = None,
    gpu_data: tuple[dict[str, Any] | None, str] | None = None,
    require_gpus: bool = True,
) -> HostReport:
    """Every check for one pool. ``gpu_data`` lets a caller read NVML once for several pools."""
    checks = host_checks(
        profile, pool, root, gpu_data if gpu_data is not None else load_gpus(nvml_json), require_gpus
    )
    return HostReport(pool.name, str(pool.fabric.type), str(root), overall([c.status for c in checks]), checks)
