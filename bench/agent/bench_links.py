"""Cost of one FabricLinks reading (agent/links.py) on the healthy A3 Ultra fixture's 8 RDMA ports, each given
the seven PMA counter files a real port has: wall and CPU per run, and the message's length.

    PYTHONPATH=src python bench/agent/bench_links.py
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from fabricguard.agent.links import LinkWatch

FIXTURE = Path(__file__).resolve().parents[2] / "tests/agent/fixtures/healthy-a3-ultra/root"
FILES = ("port_rcv_data", "port_xmit_data", "link_downed", "symbol_error", "port_rcv_errors", "port_xmit_discards",
         "link_error_recovery")


def main(runs: int = 2000) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        shutil.copytree(FIXTURE, root)
        for dev in sorted((root / "sys/class/infiniband").iterdir()):
            counters = dev / "ports/1/counters"
            counters.mkdir(exist_ok=True)
            for f in FILES:
                (counters / f).write_text("123456\n")
        w = LinkWatch()
        w.judge(root, 0.0)
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(runs):
            w.judge(root, float(i + 1))
        wall, cpu = (time.perf_counter() - t0) / runs, (time.process_time() - c0) / runs
        print(f"8 ports, {runs} runs: {wall * 1e3:.2f} ms wall, {cpu * 1e3:.2f} ms CPU per run; "
              f"message {len(w.judge(root, runs + 1.0)[2])} chars")


if __name__ == "__main__":
    main()
