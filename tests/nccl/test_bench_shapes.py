"""The benchmark's log shapes, at a small size, give the verdict they were written to give.

The init-only shape is dense enough (> DENSE_FACT_LINES fact lines per chunk) to take the bulk path,
so this also checks that path on a many-node job against what the generator wrote.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from fabricguard.nccl import inspect_paths
from fabricguard.nccl.scan import DENSE_FACT_LINES
from fabricguard.profile import Transport

GEN = Path(__file__).resolve().parents[2] / "bench" / "nccl" / "gen_logs.py"


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_logs", GEN)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_logs"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_init_only_shape(gen: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gen._init_only(tmp_path, 0.003, 8)
    out = capsys.readouterr().out
    nodes = int(out.split("(")[1].split(" nodes")[0])
    # Most lines are fact lines, so the largest file is a chunk dense enough for the bulk path.
    assert max(len(f.read_bytes().splitlines()) for f in tmp_path.iterdir()) > 2 * DENSE_FACT_LINES
    r = inspect_paths([tmp_path])
    assert (r.inter_node_transport, r.nodes, r.ranks) == (Transport.ib, nodes, nodes * 8)
    # The ring crosses nodes `nodes` times (with the wrap-around); each crossing is a send line and a
    # receive line on each of the 16 channels.
    assert r.connections["NET/IB/GDRDMA"] == 32 * nodes
    assert not r.failed and r.gpudirect_rdma is True


def test_realistic_shape(gen: ModuleType, tmp_path: Path) -> None:
    gen._realistic(tmp_path, 0.002, 2, 4)
    r = inspect_paths([tmp_path])
    assert (r.inter_node_transport, r.nodes, r.ranks) == (Transport.ib, 2, 8)
    assert not r.failed
