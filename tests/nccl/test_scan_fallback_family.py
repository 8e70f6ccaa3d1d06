"""The net-plugin WARN rule: a WARN from a plugin is a *fallback* only when the process then used a network of
another family; when it went on with the same family (the plugin recovered) the WARN is a failure line. Also:
``conclude`` reads the scanner's state without changing it, so the follower can conclude after every poll."""

from __future__ import annotations

import copy
from pathlib import Path

from fabricguard.nccl.scan import FileScanner, ScanState, conclude, inspect_paths

HEAD = "n1:7:7 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
IB_WARN = "n1:7:9 [0] NCCL WARN NET/IB : Unable to open device mlx5_3\n"
PLUGIN_WARN = "n1:7:9 [0] NCCL WARN NET/Plugin: Failed to find ncclNetPlugin_v8 symbol\n"


def _report(tmp_path: Path, *lines: str):  # type: ignore[no-untyped-def]
    log = tmp_path / "rank0.log"
    log.write_text(HEAD + "".join(lines))
    return inspect_paths([log])


def test_an_ib_warn_then_ib_is_a_failure_not_a_fallback(tmp_path: Path) -> None:
    r = _report(tmp_path, IB_WARN, "n1:7:9 [0] NCCL INFO Using network IB\n")
    assert r.fallbacks == [] and r.failed
    assert [f.line for f in r.failures] == [2] and "Unable to open device mlx5_3" in r.failures[0].why


def test_an_ib_warn_then_sockets_is_a_fallback(tmp_path: Path) -> None:
    r = _report(tmp_path, IB_WARN, "n1:7:9 [0] NCCL INFO Using network Socket\n")
    assert not r.failed and len(r.fallbacks) == 1
    assert r.fallbacks[0].why.startswith("net plugin fallback:") and "then used network Socket" in r.fallbacks[0].why
    assert any("fell back" in x for x in r.reasons)


def test_a_plugin_warn_is_a_fallback_whatever_network_follows(tmp_path: Path) -> None:
    """An external net plugin that failed to load: NCCL's built-in IB is another network, whatever its family."""
    r = _report(tmp_path, PLUGIN_WARN, "n1:7:9 [0] NCCL INFO Using network IB\n")
    assert not r.failed and len(r.fallbacks) == 1 and "then used network IB" in r.fallbacks[0].why


def test_conclude_leaves_the_state_as_it_was(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    st = ScanState()
    FileScanner(log, st).feed((HEAD + IB_WARN + "n1:7:9 [0] NCCL INFO Using network IB\n").encode(), last=True)
    before = copy.deepcopy(st)
    first, second = conclude(st, [str(log)]), conclude(st, [str(log)])
    assert st == before and first == second and first.failed and len(first.failures) == 1


def test_a_process_that_kept_its_ib_beside_sockets_did_not_fall_back(tmp_path: Path) -> None:
    """The same-family branch: the WARNing process used IB (one communicator) and sockets (another); it did not
    fall back from IB, so the WARN is a failure line, and the sockets are judged by the transport rule."""
    r = _report(tmp_path, IB_WARN, "n1:7:9 [0] NCCL INFO Using network IB\n",
                "n1:7:9 [0] NCCL INFO Using network Socket\n")
    assert r.fallbacks == [] and r.failed and [f.line for f in r.failures] == [2]
