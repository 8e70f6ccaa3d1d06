"""Commands that talk to the cluster through ``cluster_call.run_on_cluster`` (the kubectl plugin, ``breaker``):
an API server nobody answers on is one line naming it, exit 3; never a traceback."""

from __future__ import annotations

import socket
from pathlib import Path

from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.kubectl.commands import app as plugin
from kube_support import kubeconfig


def _closed_port_kubeconfig(tmp_path: Path) -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return kubeconfig(tmp_path, f"http://127.0.0.1:{port}", name="closed")


def test_an_unreachable_cluster_is_one_line_and_exit_3(tmp_path: Path) -> None:
    kc = _closed_port_kubeconfig(tmp_path)
    for target, args in ((plugin, ["pools", "--kubeconfig", kc]), (app, ["breaker", "status", "--kubeconfig", kc])):
        r = CliRunner().invoke(target, args)
        assert r.exit_code == 3, (args, r.output)
        assert "cannot reach the cluster" in r.output and "127.0.0.1" in r.output, r.output
        assert "Traceback" not in r.output
