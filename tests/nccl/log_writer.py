"""A process that writes NCCL logs the way ranks do: real lines appended at a pace, flushed line by line.

``python log_writer.py SRC_DIR DST_DIR LINES_PER_SECOND`` replays every ``*.log`` of SRC_DIR into DST_DIR, one
line at a time round-robin across the files (ranks log concurrently), and prints the monotonic time at which it
flushed the first line that holds a connection over sockets (``via NET/Socket``), then ``done``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def main() -> None:
    src, dst, rate = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    dst.mkdir(parents=True, exist_ok=True)
    sources = sorted(src.glob("*.log"))
    lines = [p.read_bytes().splitlines(keepends=True) for p in sources]
    outs = [(dst / p.name).open("ab") for p in sources]
    gap = 1.0 / rate
    first_socket = None
    for i in range(max(len(x) for x in lines)):
        for out, ls in zip(outs, lines, strict=True):
            if i < len(ls):
                out.write(ls[i])
                out.flush()
                if first_socket is None and b"via NET/Socket" in ls[i]:
                    first_socket = time.monotonic()
                    print(f"socket {first_socket}", flush=True)
                time.sleep(gap)
    for out in outs:
        out.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
