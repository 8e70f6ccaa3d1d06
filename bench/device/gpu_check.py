"""Run the GPU check (probes/gpu.py) and print its figures and verdicts as JSON; used by h200_check.sh."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fabricguard.probes.gpu import gpu_check


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ceilings", type=Path, default=None)
    ap.add_argument("--fraction", type=float, default=0.85)
    a = ap.parse_args()
    checks, measured = gpu_check(a.ceilings, a.fraction)
    print(json.dumps({"measured": measured, "checks": [c.to_dict() for c in checks]}, indent=2))


if __name__ == "__main__":
    main()
