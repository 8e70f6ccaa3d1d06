"""GPU check: bf16 matmul rate, HBM device-to-device copy bandwidth, pinned host<->device copies.

Each figure is compared with a ceiling measured on a known-good node of the same model (for the H200:
tests/fixtures/h200-gpu-ceilings.json); below ``fraction`` x ceiling is degraded. Without CUDA the check is
skipped and says why. torch is imported only when the check runs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fabricguard.probes.result import Check, Status
from fabricguard.userfiles import SourceError, read_json

DEFAULT_FRACTION = 0.85
KEYS = {
    "bf16_matmul_tflops": "bf16 matmul TFLOPS",
    "d2d_copy_GBps_read_plus_write": "HBM copy GB/s (read+write)",
    "h2d_pinned_GBps": "pinned H2D GB/s",
    "d2h_pinned_GBps": "pinned D2H GB/s",
}


def load_ceilings(path: Path | None) -> dict[str, float]:
    """GPU ceilings by metric; ``SourceError`` names the file and the entry that is not a number."""
    if path is None:
        return {}
    data = read_json(path, max_bytes=16 * 1024**2)
    if not isinstance(data, dict):
        raise SourceError(str(path), None, f"expected an object of ceilings such as {{{next(iter(KEYS))!r}: 4800}}")
    out: dict[str, float] = {}
    for k, v in data.items():
        if k not in KEYS:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise SourceError(str(path), None, f"{k}: {v!r} is not a number")
        out[k] = float(v)
    if not out:
        raise SourceError(str(path), None, f"holds none of the known ceilings ({', '.join(KEYS)})")
    return out


def judge_gpu(
    measured: dict[str, float], ceilings: dict[str, float], fraction: float = DEFAULT_FRACTION
) -> list[Check]:
    """One check per figure: pass at or above fraction x ceiling, degraded below, skipped without a ceiling."""
    checks = []
    for key, label in KEYS.items():
        if key not in measured:
            continue
        v = measured[key]
        c = ceilings.get(key)
        if c is None:
            checks.append(Check(f"gpu.{key}", Status.skipped, f"{label} {v:.1f}; no ceiling to compare", {"value": v}))
            continue
        ok = v >= fraction * c
        checks.append(
            Check(
                f"gpu.{key}",
                Status.passed if ok else Status.degraded,
                f"{label} {v:.1f} = {v / c:.0%} of ceiling {c:.1f} ({'>=' if ok else '<'} {fraction:.0%})",
                {"value": v, "ceiling": c, "fraction_of_ceiling": v / c},
            )
        )
    return checks


def _time_cuda(torch: Any, fn: Any, iters: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) / 1e3 / iters


def _matmul_seconds(torch: Any, dev: Any, n: int) -> float:
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    return _time_cuda(torch, lambda: torch.mm(a, b), iters=20)


def _copy_seconds(torch: Any, dev: Any, nbytes: int) -> float:
    src = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    return _time_cuda(torch, lambda: dst.copy_(src), iters=20)


def measure_gpu(
    device: int = 0, *, n: int = 8192, copy_bytes: int = 1 << 30, host_bytes: int = 256 << 20
) -> dict[str, float]:
    """Measure the four figures on one GPU. Raises RuntimeError without CUDA."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("torch reports no CUDA device")
    dev = torch.device("cuda", device)
    out = {"bf16_matmul_tflops": 2 * n**3 / _matmul_seconds(torch, dev, n) / 1e12}
    out["d2d_copy_GBps_read_plus_write"] = 2 * copy_bytes / _copy_seconds(torch, dev, copy_bytes) / 1e9
    torch.cuda.empty_cache()
    host = torch.empty(host_bytes, dtype=torch.uint8, pin_memory=True)
    gpu = torch.empty(host_bytes, dtype=torch.uint8, device=dev)
    out["h2d_pinned_GBps"] = host_bytes / _time_cuda(torch, lambda: gpu.copy_(host, non_blocking=True), iters=10) / 1e9
    out["d2h_pinned_GBps"] = host_bytes / _time_cuda(torch, lambda: host.copy_(gpu, non_blocking=True), iters=10) / 1e9
    out["device_name"] = torch.cuda.get_device_name(dev)  # type: ignore[assignment]
    return out


# Device nodes through which the NVIDIA driver is reached: the control node everywhere, WSL's GPU node under WSL.
# Without any of them CUDA cannot see a GPU, so the check says so without importing torch (seconds of CPU).
DRIVER_NODES = (Path("/dev/nvidiactl"), Path("/dev/dxg"))


def gpu_check(ceilings: Path | None = None, fraction: float = DEFAULT_FRACTION) -> tuple[list[Check], dict[str, Any]]:
    """The GPU check as validate runs it: skipped with the reason when torch or CUDA is missing."""
    import importlib.util
    import warnings

    if importlib.util.find_spec("torch") is None:
        return [Check("gpu.perf", Status.skipped, "torch is not installed (pip install 'fabricguard[probe]')")], {}
    if not any(node.exists() for node in DRIVER_NODES):
        return [Check("gpu.perf", Status.skipped, f"no CUDA device (no NVIDIA driver node: "
                      f"{', '.join(map(str, DRIVER_NODES))}): GPU check skipped")], {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's CPU wheels warn about a missing numpy
            import torch
    except ImportError:
        return [Check("gpu.perf", Status.skipped, "torch is not installed (pip install 'fabricguard[probe]')")], {}
    if not torch.cuda.is_available():
        return [Check("gpu.perf", Status.skipped, f"no CUDA device (torch {torch.__version__}): GPU check skipped")], {}
    t0 = time.monotonic()
    m = measure_gpu()
    m["seconds"] = time.monotonic() - t0
    return judge_gpu({k: v for k, v in m.items() if k in KEYS}, load_ceilings(ceilings), fraction), m
