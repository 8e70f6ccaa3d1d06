"""Every judging command read where people read it: an 80-column terminal, a 200-column terminal, and a pipe
(CI logs, Slack pastes: rich falls back to 80 columns there).

The assertions are a reader's: the verdict word is line 1 and agrees with the JSON; no word is split (every
word printed at that width is a word of the same output printed without any width limit); every command a fix
gives is printed whole on one line; a pipe never gets a table (no box-drawing characters, one item per block);
failures come before warnings and passes; no line is wider than the width unless it is one unbreakable unit
(a command, a log line, a single word).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_support import EXAMPLES, JOBS, SNAPSHOTS, run

from fabricguard.console import TABLE_MIN_WIDTH, console

REPO = Path(__file__).resolve().parents[2]
NOW = "2025-09-30T12:00:00Z"
PROD = SNAPSHOTS / "incident-271-days" / "production"
STAG = SNAPSHOTS / "incident-271-days" / "staging"
ONPREM = EXAMPLES / "profiles" / "onprem-infiniband.yaml"
NCCL_TESTS = REPO / "tests" / "fixtures" / "nccl" / "synthetic" / "nccl-tests" / "all_reduce_perf-ib-2x8.log"
NVML = REPO / "tests" / "fixtures" / "h200-host" / "nvml.json"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
BOX = re.compile(r"[┃│┏┓┗┛━─┡┩╇┼]")
CODE = re.compile(r"`([^`\n]+)`")
WORD = re.compile(r"^[\w./:=,'()-]+$")


@dataclass
class Case:
    name: str
    args: list[str]
    json_args: list[str]
    level_words: tuple[str, ...] = ()  # head words in the order failures-first requires


CASES = [
    Case("doctor", ["doctor", "--snapshot", str(PROD), "--now", NOW], ["--format", "json"],
         ("CRITICAL", "WARNING")),
    Case("doctor-healthy", ["doctor", "--snapshot", str(SNAPSHOTS / "healthy"), "--now", NOW], ["--format", "json"]),
    Case("doctor-diff", ["doctor", "diff", str(STAG), str(PROD)], ["--format", "json"], ("CRITICAL", "WARNING")),
    Case("verify-job", ["verify-job", str(JOBS / "socket-fallback"), "-p", str(ONPREM), "--pool", "gh200-roce"],
         ["--format", "json"], ("FAILED", "DEGRADED", "WARNING", "INFO")),
    Case("verify-job-healthy", ["verify-job", str(JOBS / "rdma-healthy"), "-p", str(ONPREM), "--pool", "gh200-roce"],
         ["--format", "json"], ("FAILED", "DEGRADED", "WARNING", "INFO")),
    Case("nccl-inspect", ["nccl", "inspect", str(JOBS / "socket-fallback" / "logs")], ["--format", "json"]),
    Case("nccl-inspect-tests", ["nccl", "inspect", str(NCCL_TESTS)], ["--format", "json"]),
    Case("profile-check", ["profile", "check", str(EXAMPLES / "profiles" / "gke-a3-ultra.yaml"),
                           str(EXAMPLES / "profiles" / "aws-p5-efa-dra.yaml")], ["--format", "json"]),
    Case("probe-host", ["probe", "host", "-p", str(ONPREM), "--pool", "gh200-roce", "--nvml-json", str(NVML)],
         ["--format", "json"],
         ("FAILED", "DEGRADED", "PASS", "SKIPPED")),
    Case("probe-host-local", ["probe", "host", "--nvml-json", str(NVML)], ["--format", "json"],
         ("FAILED", "DEGRADED", "PASS", "SKIPPED")),
    Case("placement-simulate", ["placement", "simulate", "-p", str(ONPREM), "--free", "a=12,b=4"],
         ["--format", "json"]),
]


@pytest.fixture()
def width(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Set the console's width and whether it is a terminal, as a real one would be."""
    saved = console._width

    def set_(columns: int, terminal: bool) -> None:
        monkeypatch.setenv("TTY_COMPATIBLE", "1" if terminal else "0")
        monkeypatch.delenv("FORCE_COLOR", raising=False)
        console.width = columns

    yield set_
    console._width = saved


def _strings(value: object, *, shown: bool = False) -> Iterator[str]:
    """Every string of the JSON; ``shown``: leaving out findings told by their cause (their fix is the cause's)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        if shown and value.get("cause"):
            return
        for v in value.values():
            yield from _strings(v, shown=shown)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, shown=shown)


def _output(case: Case, width, columns: int, terminal: bool) -> list[str]:
    width(columns, terminal)
    r = run(*case.args)
    assert r.exit_code in (0, 1, 2), r.output
    return [ANSI.sub("", line) for line in r.stdout.splitlines()]


TIME = re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+Z?$")


def _words(lines: list[str]) -> set[str]:
    """Words, leaving out table borders and the clock (``now`` differs between two runs)."""
    return {w for line in lines for w in line.split()
            if not all("\u2500" <= ch <= "\u257f" for ch in w) and not TIME.match(w)}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize(("columns", "terminal"), [(80, True), (200, True), (80, False)],
                         ids=["80-columns", "200-columns", "piped"])
def test_output_reads_at_its_width(case: Case, columns: int, terminal: bool, width) -> None:
    data = json.loads(run(*case.args, *case.json_args).stdout)
    lines = _output(case, width, columns, terminal)
    # The same layout (a table, or blocks) with nothing wrapped: the words as they are.
    table = any(BOX.search(line) for line in lines)
    assert not table or (terminal and columns >= TABLE_MIN_WIDTH), "a table below the table width"
    reference = _output(case, width, 100_000, table)
    assert lines, "no output"
    _assert_reads(lines, reference, data, columns, terminal, case.level_words)


def _assert_reads(lines: list[str], reference: list[str], data: dict, columns: int, terminal: bool,
                  level_words: tuple[str, ...] = ()) -> None:
    """A reader's checks of ``lines`` printed at ``columns`` (``reference``: the same output without a width)."""
    # The verdict word first, on line 1, the same as the JSON's.
    assert lines[0].split()[0] == str(data["verdict"]).upper(), lines[0]

    # No word split: every word at this width is a word of the unwrapped output.
    split = sorted(_words(lines) - _words(reference))
    assert not split, f"words split at {columns} columns: {split[:10]}"

    # Every command of every fix is printed whole, on one line.
    commands = {c.strip() for s in _strings(data, shown=True) for c in CODE.findall(s)}
    stripped = {line.strip().strip("│").strip() for line in lines}
    for cmd in commands:
        assert cmd in stripped or any(f"│ {cmd} " in line for line in lines), \
            f"command not printed whole on one line: {cmd!r}"

    # Pipes and CI logs get no table; a line is wider than the width only when it cannot be broken.
    if not terminal:
        assert not any(BOX.search(line) for line in lines), "a table in a pipe"
    logs = {s.strip() for s in _strings(data)}
    for line in lines:
        if len(line) > columns:
            body = line.strip()
            assert body in commands or body in logs or " " not in body, f"line over {columns} columns: {line!r}"

    # Failures first: the blocks' level words never go back to a worse level.
    if level_words and not terminal:
        seen = [line.split()[0] for line in lines[1:] if line and not line[0].isspace()
                and line.split()[0] in level_words]
        ranks = [level_words.index(w) for w in seen]
        assert ranks == sorted(ranks), seen


def test_the_incident_reads_in_a_screenful_not_864_lines(width) -> None:
    """The 271-day incident at 80 columns: each finding a block, not a letter per line."""
    lines = _output(CASES[0], width, 80, False)
    assert len(lines) < 120, len(lines)
    assert sum(1 for line in lines if len(line.strip()) <= 2) < 15  # blank separators only
    first = next(i for i, line in enumerate(lines) if line.startswith("CRITICAL"))
    assert "image-arch-mismatch" in lines[first], "the cause comes first"
    assert any("caused by: image-arch-mismatch" in line for line in lines)


def test_a_healthy_doctor_run_says_what_it_checked(width) -> None:
    lines = _output(CASES[1], width, 80, False)
    text = " ".join(lines)
    assert "checked" in text and "daemonset-never-ready" in text and "nothing to fix" in text


@pytest.mark.slow  # 21 runs of three commands against the emulator: ~6-12 s
async def test_commands_that_read_the_cluster_read_at_their_width(width, tmp_path: Path) -> None:
    """``breaker status``, ``pool coverage`` (a breaker open, nodes that need a person first) and ``pool transition
    status`` (waiting on a running gang) against the emulator, set up as test_json_schemas does: the same checks at
    80 columns, 200 and piped."""
    import asyncio
    from datetime import timedelta

    from kmock import Server
    from test_json_schemas import _cli, _fv, _support

    from fabricguard import breaker
    from fabricguard.controller import proof as pf
    from kube_support import Emulator, Rbac, kubeconfig

    cs = _support("controller", "controller_support")
    tt = _support("placement", "test_transition")
    rbac = Rbac(admins={"admin"}).bind("platform-operator", tt.transition_roles(tt.NS))
    tokens = {"t": {"username": "platform-operator"}, "admin": {"username": "admin"}}
    async with Emulator(rbac=rbac, tokens=tokens) as k8s, Server(k8s) as server:
        url = str(server.url).rstrip("/")
        tt.seed(k8s, gang="Running")
        cs.load_incident(k8s, only=("nodes",))
        admin = kubeconfig(tmp_path, url, "admin", name="admin")
        nodes = sorted(n for (res, _, n) in k8s.objects if res == "v1/nodes" and n.startswith("prd-gh200-"))
        now = cs.NOW
        rows = {n: pf.NodeProof(n, "proven", cs.ts(now - timedelta(hours=2)), "fgp-1", nodes[0], 44.9, "intra")
                for n in nodes}
        rows[nodes[-1]] = pf.NodeProof(nodes[-1], "suspect", None, "fgp-2", nodes[0], 3.1, "cross",
                                       message="2 of 2 pairs with it failed: busbw 3.1 GB/s, under the floor 36")
        state = pf.ProofState(nodes=rows, breaker=breaker.BreakerState(
            True, now - timedelta(minutes=5), "4 of 6 nodes newly failing within 1h, budget 1", tuple(nodes)))
        _fv(k8s, cs.POOL, {"proof": state.to_dict(40.0),
                           "breakers": [{"check": "fabric.allocatable", **state.breaker.to_dict()}]})
        prof = tmp_path / "proof.yaml"
        prof.write_text(cs.PROFILE.replace("    canary:", "    proof: {every: 24h}\n    canary:"))
        transition = ["pool", "transition", "status", "--from", tt.FROM, "--to", tt.TO, "--kubeconfig",
                      kubeconfig(tmp_path, url, name="operator")]
        r = await asyncio.to_thread(_cli, *["apply" if a == "status" else a for a in transition],
                                    "--now", "2026-11-30T12:00:00Z")
        assert r.exit_code == 1, r.output
        commands = [["breaker", "status", "--kubeconfig", admin],
                    ["pool", "coverage", "-p", prof, "--kubeconfig", admin, "--now", cs.ts(now)], transition]
        for args in commands:
            data = json.loads((await asyncio.to_thread(_cli, *args, "--format", "json")).stdout)
            for columns, terminal in ((80, True), (200, True), (80, False)):
                width(columns, terminal)
                lines = [ANSI.sub("", x) for x in (await asyncio.to_thread(_cli, *args)).stdout.splitlines()]
                table = any(BOX.search(line) for line in lines)
                assert not table or (terminal and columns >= TABLE_MIN_WIDTH), (args[:2], "a table below its width")
                width(100_000, table)
                reference = [ANSI.sub("", x) for x in (await asyncio.to_thread(_cli, *args)).stdout.splitlines()]
                _assert_reads(lines, reference, data, columns, terminal)
            if args[1] == "coverage":  # the node that needs a person comes first
                assert lines[lines.index("") + 1].startswith(f"{nodes[-1]}  suspect"), lines
