"""Time-to-exit of every cluster command against an API server that accepts TCP and never answers.

Usage: PYTHONPATH=src python bench/controller/silent_server.py [--timeout SECONDS]
(without --timeout: the default request timeouts of fabricguard.kube.Timeouts). The commands run one after
another (not in parallel), so each figure is that command's own time on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "cli"))

from test_silent_api_server import commands  # noqa: E402

from kube_support import kubeconfig, silent_server  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", help="FABRICGUARD_API_TIMEOUT for the commands (default: unset)")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("FABRICGUARD_API_TIMEOUT", None)
    if args.timeout:
        env["FABRICGUARD_API_TIMEOUT"] = args.timeout
    with tempfile.TemporaryDirectory() as tmp, silent_server() as server:
        kc = kubeconfig(Path(tmp), server.url)
        print("| command | exit | seconds | error line |\n|---|---|---|---|")
        for name, cmd in commands(kc, Path(tmp)).items():
            t0 = time.monotonic()
            r = subprocess.run([sys.executable, "-m", "fabricguard", *cmd], capture_output=True, text=True, env=env,
                               cwd=REPO, timeout=120)
            line = next((ln for ln in r.stderr.splitlines() if ln.startswith("error:")), r.stderr.strip()[-200:])
            print(f"| `{name}` | {r.returncode} | {time.monotonic() - t0:.1f} | {line.replace(server.url, 'URL')[:150]} |",
                  flush=True)


if __name__ == "__main__":
    main()
