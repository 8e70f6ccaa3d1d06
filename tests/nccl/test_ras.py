"""NCCL RAS: reports in NCCL's exact JSON (``tests/fixtures/ras``, v2.30.7 and v2.28.9 formats), the two-query
hang rule, the rank joined to its pod and node by IP, and the in-pod client against a server speaking RAS's
protocol over real TCP."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fabricguard.controller.live import RunningJob
from fabricguard.controller.suspects import job_pods
from fabricguard.nccl.ras import CLIENT, RasError, hang_verdict, parse_status, waited_for

RAS = Path(__file__).resolve().parents[1] / "fixtures" / "ras"


def _s(name: str):  # type: ignore[no-untyped-def]
    return parse_status((RAS / name).read_bytes())


def test_a_hung_job_names_the_rank_the_others_wait_for_over_two_queries() -> None:
    q1, q2 = _s("v2.30.7-hung-rank9-q1.json"), _s("v2.30.7-hung-rank9-q2.json")
    assert q1.nccl_version == "2.30.7" and len(q1.comms) == 1 and q1.comms[0].size == 16
    v = hang_verdict(q1, q2)
    assert v.hung
    (w,) = v.waited_for
    assert (w.rank, w.host, w.pid) == (9, "10.8.0.19", 300) and "AllReduce 81233" in w.why
    pods = [{"metadata": {"name": f"llm-3d-workers-0-{n}", "namespace": "ml-search",
                          "labels": {"jobset.sigs.k8s.io/jobset-name": "llm-3d"}},
             "spec": {"nodeName": f"gpu-node-{n:03d}"}, "status": {"podIP": f"10.8.0.{n + 10}"}} for n in range(16)]
    job = RunningJob("JobSet", "jobset.x-k8s.io/v1alpha2", "jobsets", "ml-search", "llm-3d", "p", {})
    place = job_pods(job, pods)[w.host]
    assert (place.pod, place.node) == ("llm-3d-workers-0-9", "gpu-node-009")


def test_one_query_or_advancing_counts_are_not_a_hang() -> None:
    q1 = _s("v2.30.7-hung-rank9-q1.json")
    assert not hang_verdict(q1, _s("v2.30.7-healthy.json")).hung  # the counts moved on
    assert not hang_verdict(_s("v2.30.7-healthy.json"), q1).hung  # mismatched now, not before
    assert waited_for(_s("v2.30.7-healthy.json")) == []


def test_a_job_in_a_long_checkpoint_is_never_called_hung() -> None:
    ck = _s("v2.30.7-checkpoint.json")  # every rank launched the same collectives: waiting in the framework
    v = hang_verdict(ck, ck)
    assert not v.hung and "same collectives" in v.why


def test_the_2_28_9_report_with_a_missing_rank_is_repaired() -> None:
    raw = (RAS / "v2.28.9-missing-rank15.json").read_bytes()
    import json
    with pytest.raises(ValueError):
        json.loads(raw)  # NCCL 2.28.7-2.28.9 write no comma after a missing rank's nvml_dev
    s = parse_status(raw)
    assert s.repaired and s.comms[0].missing[0].rank == 15 and s.comms[0].missing[0].unresponsive
    (w,) = waited_for(s)
    assert w.rank == 15 and w.host == "10.8.0.25" and "unresponsive" in w.why
    with pytest.raises(RasError):
        parse_status(b"Failed to connect to the NCCL RAS service!\n")


def test_the_in_pod_client_speaks_the_protocol(tmp_path: Path) -> None:
    """A server answering like NCCL's RAS thread (``client_support.cc``) on a free port; the client is the one the
    controller runs in the pod, its port rewritten."""
    report = (RAS / "v2.30.7-hung-rank9-q1.json").read_bytes()
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    got: list[bytes] = []

    def serve() -> None:
        conn, _ = srv.accept()
        f = conn.makefile("rwb")
        for expect, answer in ((b"CLIENT PROTOCOL 2\n", b"SERVER PROTOCOL 2\n"), (b"SET FORMAT json\n", b"OK\n"),
                               (b"STATUS\n", report)):
            line = f.readline()
            got.append(line)
            assert line == expect
            f.write(answer)
            f.flush()
        conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    r = subprocess.run([sys.executable, "-c", CLIENT.replace("28028", str(port)).replace("'localhost'",
                                                                                         "'127.0.0.1'")],
                       capture_output=True, timeout=30, check=False)
    t.join(5)
    srv.close()
    assert r.returncode == 0, r.stderr
    assert parse_status(r.stdout).comms[0].ranks[9].counts["AllReduce"] == 81233
    assert got == [b"CLIENT PROTOCOL 2\n", b"SET FORMAT json\n", b"STATUS\n"]
