"""Collective probe runner: torch.distributed ranks that time all_reduce, all_gather and reduce_scatter.

Ranks come from two places: ``run_local`` starts N processes on this machine (a free loopback port as the
rendezvous), each forked from one server process that has already imported torch (an import costs seconds of
CPU, most of it registering operators: N ranks pay it once, not N times), and ``run_in_env`` runs this process
as one rank of a job started by torchrun (or anything that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT).
NCCL is used when CUDA is available, gloo otherwise.

Each rank writes NCCL_DEBUG=INFO output to its own file (NCCL_DEBUG_FILE) in the run's log directory, and the
NCCL transport classifier reads them back, so the probe reports the transport NCCL really used. With gloo
there is no NCCL log: gloo moves tensors over TCP only, so its transport is ``socket`` by construction.

torch is imported only inside the rank code, never at module import.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import shutil
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from fabricguard.probes.bw import (
    COLLECTIVES,
    DTYPE_BYTES,
    Expectation,
    Judgement,
    Row,
    element_counts,
    judge,
    make_row,
)

RESULT_FILE = "result.json"
ROWS_FILE = "rows.jsonl"  # rank 0 appends each row as it is measured; the parent streams them from here
OnRow = Callable[[Row], None]
_PATTERN_MOD = 13  # verification values are small integers, exact in every float type we offer


@dataclass
class CollectiveConfig:
    collectives: list[str]
    sizes: list[int]
    warmup: int = 5
    iters: int = 20
    dtype: str = "float"
    backend: str = "auto"  # auto | nccl | gloo
    check: bool = True
    log_dir: str = ""
    nccl_net: str | None = None  # value forced into NCCL_NET, None leaves the environment alone
    init_timeout_s: float = 120.0
    # Each rail alone after the measurement (``measure_rails``): rail k is local rank k (GPU k, and its NIC) of
    # every node. ``local_world``: ranks per node (0: the launcher's LOCAL_WORLD_SIZE).
    rails: bool = False
    local_world: int = 0

    def validate(self) -> None:
        unknown = [c for c in self.collectives if c not in COLLECTIVES]
        if unknown:
            raise ValueError(f"unknown collective(s) {unknown}; choose from {', '.join(COLLECTIVES)}")
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"unknown type {self.dtype!r}; choose from {', '.join(DTYPE_BYTES)}")
        if self.backend not in ("auto", "nccl", "gloo"):
            raise ValueError("backend must be auto, nccl or gloo")
        if self.iters < 1 or self.warmup < 0:
            raise ValueError("need iters >= 1 and warmup >= 0")


@dataclass
class CollectiveResult:
    backend: str
    world_size: int
    rows: list[Row]
    failed: bool
    error: str | None
    log_dir: str
    env: dict[str, str]
    transport: str = "unknown"
    transport_why: str = ""
    nccl: dict[str, Any] | None = None
    hosts: list[str] = field(default_factory=list)
    seconds: float = 0.0
    judgement: Judgement | None = None
    log_dir_removed: bool = False  # a temporary log directory is removed once its NCCL logs are read
    rails: list[dict[str, Any]] = field(default_factory=list)  # measure_rails, with --rails

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rows"] = [r.to_dict() for r in self.rows]
        d["judgement"] = self.judgement.to_dict() if self.judgement else None
        return d


def default_log_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="fabricguard-collective-"))


def nccl_env(log_dir: Path, rank: int, nccl_net: str | None) -> dict[str, str]:
    """Environment each rank sets before NCCL initialises: INFO logs to a per-rank file, the forced net."""
    env = {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_FILE": str(log_dir / f"nccl.rank{rank}.%h.%p.log"),
    }
    if "NCCL_DEBUG_SUBSYS" not in os.environ:
        # INIT carries "Using network" and the "Channel .. via NET/.." lines; NET the plugin choice.
        env["NCCL_DEBUG_SUBSYS"] = "INIT,BOOTSTRAP,ENV,NET"
    if nccl_net:
        env["NCCL_NET"] = nccl_net
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------------------------- rank code


def _resolve_backend(torch: Any, wanted: str) -> str:
    if wanted == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    if wanted == "nccl" and not torch.cuda.is_available():
        raise RuntimeError("backend nccl needs CUDA, and torch reports no CUDA device here; use gloo")
    return wanted


def _expected_sums(torch: Any, world: int, dtype: Any, device: Any) -> Any:
    # Sum over ranks r of ((j + r) % MOD) for j in 0..MOD-1: what every reduced element must equal.
    return torch.tensor(
        [sum((j + r) % _PATTERN_MOD for r in range(world)) for j in range(_PATTERN_MOD)],
        dtype=dtype,
        device=device,
    )


def _pattern(torch: Any, n: int, offset: int, dtype: Any, device: Any) -> Any:
    return ((torch.arange(n, device=device, dtype=torch.int64) + offset) % _PATTERN_MOD).to(dtype)


def _one(dist: Any, coll: str, inp: Any, out: Any) -> None:
    if coll == "all_reduce":
        dist.all_reduce(inp)
    elif coll == "all_gather":
        dist.all_gather_into_tensor(out, inp)
    else:
        dist.reduce_scatter_tensor(out, inp)


def _buffers(torch: Any, coll: str, total: int, per_rank: int, dtype: Any, device: Any) -> tuple[Any, Any]:
    if coll == "all_reduce":
        return torch.zeros(total, dtype=dtype, device=device), None
    if coll == "all_gather":
        return torch.zeros(per_rank, dtype=dtype, device=device), torch.empty(total, dtype=dtype, device=device)
    return torch.zeros(total, dtype=dtype, device=device), torch.empty(per_rank, dtype=dtype, device=device)


def _verify(torch: Any, dist: Any, coll: str, rank: int, world: int, total: int, per: int, dtype: Any, dev: Any) -> int:
    """Run the collective once on known data and count the elements that differ from the expected result."""
    sums = _expected_sums(torch, world, dtype, dev)
    if coll == "all_reduce":
        x = _pattern(torch, total, rank, dtype, dev)
        dist.all_reduce(x)
        expected = sums[torch.arange(total, device=dev) % _PATTERN_MOD]
        got = x
    elif coll == "all_gather":
        x = _pattern(torch, per, rank, dtype, dev)
        got = torch.empty(total, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(got, x)
        idx = torch.arange(total, device=dev)
        expected = ((idx % per + idx // per) % _PATTERN_MOD).to(dtype)
    else:
        x = _pattern(torch, total, rank, dtype, dev)
        got = torch.empty(per, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(got, x)
        expected = sums[(torch.arange(per, device=dev) + rank * per) % _PATTERN_MOD]
    return int((got != expected).sum().item())


def _sync(torch: Any, backend: str) -> None:
    if backend == "nccl":
        torch.cuda.synchronize()


def measure(
    torch: Any, dist: Any, cfg: CollectiveConfig, backend: str, device: Any, on_row: OnRow | None = None
) -> list[Row]:
    """Time every collective at every size on the initialised default group; identical rows on every rank.

    ``on_row`` sees each row as soon as it is measured (the table streams, like nccl-tests').
    """
    rank, world = dist.get_rank(), dist.get_world_size()
    tdtype = {
        2: torch.bfloat16 if cfg.dtype == "bfloat16" else torch.float16,
        4: torch.float32,
        8: torch.float64,
    }[DTYPE_BYTES[cfg.dtype]]
    rows: list[Row] = []
    for coll in cfg.collectives:
        for size in cfg.sizes:
            total, per = element_counts(coll, size, DTYPE_BYTES[cfg.dtype], world)
            if total == 0:
                continue
            inp, out = _buffers(torch, coll, total, per, tdtype, device)
            for _ in range(cfg.warmup):
                _one(dist, coll, inp, out)
            _sync(torch, backend)
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(cfg.iters):
                _one(dist, coll, inp, out)
            _sync(torch, backend)
            dt = (time.perf_counter() - t0) / cfg.iters
            del inp, out
            wrong = _verify(torch, dist, coll, rank, world, total, per, tdtype, device) if cfg.check else 0
            # nccl-tests reports the time averaged over ranks and the wrong elements summed over ranks.
            stats = torch.tensor([dt, float(wrong)], dtype=torch.float64, device=device)
            dist.all_reduce(stats)
            row = make_row(
                coll,
                total * DTYPE_BYTES[cfg.dtype],
                cfg.dtype,
                world,
                stats[0].item() / world,
                int(stats[1].item()),
            )
            rows.append(row)
            if on_row is not None:
                on_row(row)
    return rows


def _gather_text(torch: Any, dist: Any, world: int, device: Any, text: str, size: int = 64) -> list[str]:
    # all_gather_object needs numpy, which the probe does not require; fixed-size bytes per rank instead.
    raw_mine = text.encode()[:size].ljust(size, b"\0")
    mine = torch.tensor(list(raw_mine), dtype=torch.uint8, device=device)
    out = torch.empty(size * world, dtype=torch.uint8, device=device)
    dist.all_gather_into_tensor(out, mine)
    raw = bytes(out.cpu().tolist())
    return [raw[i * size : (i + 1) * size].rstrip(b"\0").decode(errors="replace") for i in range(world)]


def _gather_hostnames(torch: Any, dist: Any, world: int, device: Any) -> list[str]:
    return _gather_text(torch, dist, world, device, socket.gethostname())


def _gpu_pci(torch: Any, backend: str, device: Any) -> str | None:
    """The PCI address of this rank's GPU (``0000:1b:00.0``), or None without CUDA (gloo)."""
    if backend != "nccl":
        return None
    p = torch.cuda.get_device_properties(device)
    dom, bus, dev = (getattr(p, k, None) for k in ("pci_domain_id", "pci_bus_id", "pci_device_id"))
    if not all(isinstance(v, int) for v in (dom, bus, dev)):
        return None
    return f"{dom:04x}:{bus:02x}:{dev:02x}.0"


def _member(text: str) -> list[str]:
    """One rank's [node, GPU PCI, NICs, NIC PCI] as gathered (fields are capped so the JSON fits its 256 bytes;
    anything else reads as nothing known)."""
    try:
        m = json.loads(text or "[]")
    except ValueError:
        return []
    return [str(x) for x in m] if isinstance(m, list) and len(m) == 4 else []


def measure_rails(torch: Any, dist: Any, cfg: CollectiveConfig, backend: str, device: Any, local_rank: int,
                  local_world: int) -> list[dict[str, Any]]:
    """Each rail alone: all_reduce of the largest size among local rank k of every node, one rail after another
    (the others wait), so a slow NIC or link shows as its own rail's busbw instead of hiding in the whole
    node's. Every member says which node it ran on (``FG_NODE_NAME``, else its hostname) and which RDMA NIC is
    nearest its GPU on the PCIe tree (``probes.host.nearest_nics``): the rail's NIC on that node. Identical on
    every rank; empty when there are not two nodes of ``local_world`` ranks."""
    from fabricguard.probes.host import nearest_nics, nic_pci

    rank, world = dist.get_rank(), dist.get_world_size()
    if local_world < 1 or world % local_world or world // local_world < 2:
        return []
    nnodes = world // local_world
    tdtype = {2: torch.float16, 4: torch.float32, 8: torch.float64}[DTYPE_BYTES[cfg.dtype]]
    size = max(cfg.sizes)
    total, _per = element_counts("all_reduce", size, DTYPE_BYTES[cfg.dtype], nnodes)
    # Every rank creates every group, in the same order (torch.distributed requires it).
    groups = [dist.new_group([n * local_world + k for n in range(nnodes)]) for k in range(local_world)]
    times_s = torch.zeros(local_world, dtype=torch.float64, device=device)
    for k, group in enumerate(groups):
        dist.barrier()
        if local_rank == k and total:
            buf = torch.zeros(total, dtype=tdtype, device=device)
            for _ in range(max(1, cfg.warmup)):  # the first call also sets up the rail's communicator
                dist.all_reduce(buf, group=group)
            _sync(torch, backend)
            t0 = time.perf_counter()
            for _ in range(cfg.iters):
                dist.all_reduce(buf, group=group)
            _sync(torch, backend)
            dt = torch.tensor([(time.perf_counter() - t0) / cfg.iters], dtype=torch.float64, device=device)
            dist.all_reduce(dt, group=group)
            if rank < local_world:  # node 0's member reports the rail's mean time
                times_s[k] = dt[0] / nnodes
            del buf
        dist.barrier()
    dist.all_reduce(times_s)
    pci = _gpu_pci(torch, backend, device)
    nics = nearest_nics(Path("/"), pci) if pci else []
    nic_addr = (nic_pci(Path("/"), nics[0]) or "") if len(nics) == 1 else ""
    me = json.dumps([(os.environ.get("FG_NODE_NAME") or socket.gethostname())[:64], pci or "",
                     ",".join(nics[:4])[:80], nic_addr[:16]])
    members = [_member(t) for t in _gather_text(torch, dist, world, device, me, 256)]
    out = []
    for k in range(local_world):
        dt_k = float(times_s[k].item())
        row = make_row("all_reduce", total * DTYPE_BYTES[cfg.dtype], cfg.dtype, nnodes, dt_k, 0) if dt_k > 0 else None
        out.append({
            "rail": k,
            "bytes": total * DTYPE_BYTES[cfg.dtype],
            "time_us": round(dt_k * 1e6, 3),
            "busbw_gbps": row.busbw_gbps if row is not None else 0.0,
            "members": [{"rank": n * local_world + k, "node": m[0], "gpu_pci": m[1] or None,
                         "nic": m[2] or None, "nic_pci": m[3] or None}
                        for n in range(nnodes) for m in [members[n * local_world + k]] if len(m) == 4],
        })
    return out


def rank_main(
    rank: int, world: int, local_rank: int, cfg: CollectiveConfig, init_method: str, on_row: OnRow | None = None
) -> dict[str, Any]:
    """One rank: set the NCCL environment, initialise, measure, tear down. Returns the rank's result."""
    import warnings

    warnings.filterwarnings("ignore")
    log_dir = Path(cfg.log_dir)
    env = nccl_env(log_dir, rank, cfg.nccl_net)
    os.environ.update(env)
    import datetime

    import torch
    import torch.distributed as dist

    backend = _resolve_backend(torch, cfg.backend)
    kwargs: dict[str, Any] = {}
    if backend == "nccl":
        if local_rank >= torch.cuda.device_count():
            raise RuntimeError(
                f"local rank {local_rank} has no GPU of its own (torch sees {torch.cuda.device_count()}); "
                "NCCL refuses two ranks on one GPU"
            )
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        kwargs["device_id"] = device  # eager NCCL init: a forced NCCL_NET that cannot load fails right here
    else:
        device = torch.device("cpu")
    dist.init_process_group(
        backend,
        init_method=init_method,
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=cfg.init_timeout_s),
        **kwargs,
    )
    try:
        rows = measure(torch, dist, cfg, backend, device, on_row)
        hosts = _gather_hostnames(torch, dist, world, device)
        local_world = cfg.local_world or int(os.environ.get("LOCAL_WORLD_SIZE", "0") or 0)
        rails = measure_rails(torch, dist, cfg, backend, device, local_rank, local_world) if cfg.rails else []
    finally:
        dist.destroy_process_group()
    return {
        "backend": backend,
        "world_size": world,
        "rows": [r.to_dict() for r in rows],
        "hosts": hosts,
        "env": env,
        "rails": rails,
    }


# What the rank server imports before it forks any rank (torch, without its import warnings on our stderr).
# Loaded once per process that runs local ranks (the server outlives one run_local: a second run in the same
# process forks from the same server).
RANK_PRELOAD = ("fabricguard.probes.rank_preload",)


def _rank_context() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(RANK_PRELOAD))  # takes effect when the server starts (the first rank)
    return ctx


def _forked_rank(cfg_path: str, rank: int, world: int, port: int, env: dict[str, str], output: str) -> None:
    """A rank forked from the rank server: the environment of the run that started it (the server was started
    with an earlier one), stdout and stderr to its own file, no stdin; then the rank itself."""
    os.environ.clear()
    os.environ.update(env)
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    for src, dst in ((fd, 1), (fd, 2), (null, 0)):
        os.dup2(src, dst)
    os.close(fd)
    os.close(null)
    sys.exit(_worker_main([cfg_path, str(rank), str(world), str(port)]))


def _worker_main(argv: list[str]) -> int:
    """One local rank: ``CONFIG RANK WORLD PORT`` (forked by ``run_local``, or ``python -m`` this module)."""
    cfg_path, rank, world, port = Path(argv[0]), int(argv[1]), int(argv[2]), int(argv[3])
    cfg = CollectiveConfig(**json.loads(cfg_path.read_text()))
    log_dir = Path(cfg.log_dir)
    stream: IO[str] | None = open(log_dir / ROWS_FILE, "a") if rank == 0 else None  # noqa: SIM115 - closed below

    def on_row(row: Row) -> None:
        if stream is not None:
            stream.write(json.dumps(row.to_dict()) + "\n")
            stream.flush()

    try:
        local = rank % cfg.local_world if cfg.local_world else rank  # --rails --local-world: nodes simulated here
        res = rank_main(rank, world, local, cfg, f"tcp://127.0.0.1:{port}", on_row)
    except BaseException:
        (log_dir / f"rank{rank}.error.txt").write_text(traceback.format_exc())
        return 1
    finally:
        if stream is not None:
            stream.close()
    if rank == 0:
        (log_dir / RESULT_FILE).write_text(json.dumps(res))
    return 0


# ------------------------------------------------------------------------------------------ orchestration


def _result_from(raw: dict[str, Any], cfg: CollectiveConfig, seconds: float) -> CollectiveResult:
    return CollectiveResult(
        backend=raw["backend"],
        world_size=raw["world_size"],
        rows=[Row(**r) for r in raw["rows"]],
        failed=False,
        error=None,
        log_dir=cfg.log_dir,
        env=raw["env"],
        hosts=raw.get("hosts", []),
        seconds=seconds,
        rails=list(raw.get("rails") or []),
    )


def exception_text(tb: str) -> str:
    """The exception line(s) at the end of a traceback, without the frames (NCCL adds 'Last error:')."""
    lines = tb.rstrip().splitlines()
    frames = [i for i, ln in enumerate(lines) if ln.startswith("  File ")]
    tail = lines[frames[-1] + 1 :] if frames else lines
    keep = [ln.strip() for ln in tail if ln.strip() and not ln.startswith("    ") and set(ln.strip()) - set("^~")]
    return " ".join(keep) or (lines[-1].strip() if lines else "")


def _first_error(log_dir: Path) -> str:
    msgs = [
        f"{p.name.split('.')[0]}: {exception_text(p.read_text(errors='replace'))}"
        for p in sorted(log_dir.glob("rank*.error.txt"))
    ]
    return "; ".join(msgs) or "a rank exited without a result"


class _RowTail:
    """Rows rank 0 has appended to its rows file so far, each handed to ``on_row`` once."""

    def __init__(self, path: Path, on_row: OnRow | None) -> None:
        self.path, self.on_row, self.offset = path, on_row, 0

    def poll(self) -> None:
        if self.on_row is None or not self.path.is_file():
            return
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next poll
        for line in data[:end].splitlines():
            self.on_row(Row(**json.loads(line)))
        self.offset += end


def run_local(
    cfg: CollectiveConfig, nranks: int, *, timeout_s: float = 600.0, on_row: OnRow | None = None
) -> CollectiveResult:
    """Start ``nranks`` ranks on this machine and collect rank 0's measurements, streaming rows to ``on_row``.

    The ranks come from multiprocessing's forkserver, which prepares each child as it does any other: a script
    that calls this needs the usual ``if __name__ == "__main__":`` guard (the CLI's entry points have it)."""
    cfg.validate()
    if nranks < 1:
        raise ValueError("need at least one rank")
    log_dir = Path(cfg.log_dir) if cfg.log_dir else default_log_dir()
    log_dir.mkdir(parents=True, exist_ok=True)
    cfg.log_dir = str(log_dir)
    port = free_port()
    cfg_path = log_dir / "config.json"
    cfg_path.write_text(json.dumps(asdict(cfg)))
    (log_dir / ROWS_FILE).write_text("")  # a kept --out directory may hold rows of an earlier run
    t0 = time.monotonic()
    ctx = _rank_context()
    env = dict(os.environ)
    procs: list[Any] = []
    codes: list[int | None] = []
    deadline = t0 + timeout_s
    timed_out = False
    tail = _RowTail(log_dir / ROWS_FILE, on_row)
    try:
        for r in range(nranks):
            proc = ctx.Process(target=_forked_rank, name=f"rank{r}",
                               args=(str(cfg_path), r, nranks, port, env, str(log_dir / f"rank{r}.stderr.txt")))
            proc.start()  # the first start waits for the server's torch import
            procs.append(proc)
        while any(p.exitcode is None for p in procs):
            tail.poll()
            if time.monotonic() >= deadline:
                timed_out = True
                break
            if any(p.exitcode not in (None, 0) for p in procs):
                # A dead rank leaves its peers waiting in a collective forever: a moment, then stop them.
                end = time.monotonic() + 3
                while any(p.exitcode is None for p in procs) and time.monotonic() < end:
                    time.sleep(0.05)
                break
            time.sleep(0.02)
    finally:
        for p in procs:
            if p.exitcode is None:
                p.terminate()
                p.join(timeout=5)
                if p.exitcode is None:
                    p.kill()
                    p.join()
            codes.append(p.exitcode)
            p.close()
    tail.poll()
    seconds = time.monotonic() - t0
    result_file = log_dir / RESULT_FILE
    if len(codes) == nranks and all(c == 0 for c in codes) and result_file.is_file():
        return _result_from(json.loads(result_file.read_text()), cfg, seconds)
    error = f"timed out after {timeout_s:.0f} s" if timed_out else _first_error(log_dir)
    return CollectiveResult(
        backend=cfg.backend,
        world_size=nranks,
        rows=[],
        failed=True,
        error=error,
        log_dir=str(log_dir),
        env=nccl_env(log_dir, 0, cfg.nccl_net),
        seconds=seconds,
    )


def in_launcher_env() -> bool:
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def run_in_env(cfg: CollectiveConfig, on_row: OnRow | None = None) -> CollectiveResult:
    """Run this process as one rank of a job whose launcher set RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT."""
    cfg.validate()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    log_dir = Path(cfg.log_dir) if cfg.log_dir else default_log_dir()
    log_dir.mkdir(parents=True, exist_ok=True)
    cfg.log_dir = str(log_dir)
    t0 = time.monotonic()
    try:
        raw = rank_main(rank, world, local_rank, cfg, "env://", on_row)
    except Exception as e:  # the failure itself is the finding (e.g. NCCL_NET forced and absent)
        return CollectiveResult(
            backend=cfg.backend,
            world_size=world,
            rows=[],
            failed=True,
            error=f"{type(e).__name__}: {e}",
            log_dir=str(log_dir),
            env=nccl_env(log_dir, rank, cfg.nccl_net),
            seconds=time.monotonic() - t0,
        )
    return _result_from(raw, cfg, time.monotonic() - t0)


def classify(result: CollectiveResult) -> None:
    """Fill ``transport``: gloo is TCP by construction; NCCL's own logs decide otherwise."""
    if result.backend == "gloo":
        result.transport = "socket"
        result.transport_why = "gloo moves tensors over TCP sockets only; it has no RDMA path"
        return
    log_dir = Path(result.log_dir)
    logs = sorted(log_dir.glob("nccl.rank*.log"))
    if not logs:
        result.transport = "unknown"
        result.transport_why = f"no NCCL debug log was written in {log_dir}"
        return
    from fabricguard.nccl import inspect_paths

    report = inspect_paths(logs)
    result.nccl = report.to_dict()
    result.transport = str(report.inter_node_transport)
    net = report.network or "no network line"
    ev = "; ".join(f"{Path(e.file).name}:{e.line} {e.why}" for e in report.evidence[:3])
    result.transport_why = f"NCCL {', '.join(report.nccl_version) or '?'}, network {net}" + (f"; {ev}" if ev else "")
    if report.failed:
        result.failed = True
        result.error = result.error or "NCCL logged a failure (see the evidence)"


def run_probe(
    cfg: CollectiveConfig,
    *,
    local_ranks: int | None,
    expect: Expectation | None,
    timeout_s: float = 600.0,
    on_row: OnRow | None = None,
) -> CollectiveResult:
    """Run (spawned or under a launcher), classify the transport and judge against the pool, if any.

    Rows go to ``on_row`` as they are measured. Without ``cfg.log_dir`` the logs go to a temporary
    directory that is removed once they are read (``log_dir_removed``); a given directory is kept.
    """
    temporary = not cfg.log_dir
    if local_ranks is None and in_launcher_env():
        result = run_in_env(cfg, on_row)
    else:
        result = run_local(cfg, local_ranks or 2, timeout_s=timeout_s, on_row=on_row)
    classify(result)
    if temporary:
        with contextlib.suppress(OSError):
            shutil.rmtree(result.log_dir)
        result.log_dir_removed = not Path(result.log_dir).exists()
    if expect is not None:
        result.judgement = judge(
            result.rows,
            result.transport,
            result.transport_why,
            expect,
            failed=result.failed,
            failure=result.error,
        )
    return result


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
