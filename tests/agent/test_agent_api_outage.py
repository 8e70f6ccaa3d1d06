"""The long-running agent and a transient API outage at start (a node that boots before the API server answers,
an exec credential plugin that fails once): it retries with backoff and starts reporting once the API answers,
instead of exiting 3 into CrashLoopBackOff. A kubeconfig that cannot work is still refused at once."""

from __future__ import annotations

import asyncio
import json
import socket
import stat
from pathlib import Path

from agent_support import NODE_NAME

from fabricguard.agent.commands import connect_retrying


def _exec_kubeconfig(tmp_path: Path, url: str, token: str, failures: int) -> str:
    """A kubeconfig whose exec credential plugin fails ``failures`` times, then returns ``token``."""
    count = tmp_path / "count"
    script = tmp_path / "cred.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"n=$(cat {count} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {count}\n"
        f'if [ $n -le {failures} ]; then echo "token service unavailable" >&2; exit 1; fi\n'
        'echo \'{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential",'
        f'"status":{{"token":"{token}"}}}}\'\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                                  "command": str(script)}}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(cfg))
    return str(path)


async def test_credentials_failing_twice_are_retried_until_the_node_is_read(apiserver, tmp_path: Path) -> None:
    _k8s, url = apiserver
    kc = _exec_kubeconfig(tmp_path, url, "agent-own", failures=2)
    stop = asyncio.Event()
    client = await asyncio.wait_for(connect_retrying(kc, stop, first_delay=0.05), timeout=20)
    assert client is not None
    assert (await client.get(NODE_NAME))["metadata"]["name"] == NODE_NAME
    assert (tmp_path / "count").read_text().strip() == "3"


async def test_credentials_that_keep_failing_are_retried_until_stopped(tmp_path: Path) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    kc = _exec_kubeconfig(tmp_path, f"http://127.0.0.1:{port}", "agent-own", failures=10_000)
    stop = asyncio.Event()
    task = asyncio.ensure_future(connect_retrying(kc, stop, first_delay=0.05, max_delay=0.1))
    await asyncio.sleep(1.0)
    assert not task.done()  # still trying: no exit, no crash
    stop.set()
    assert await asyncio.wait_for(task, timeout=5) is None
    assert int((tmp_path / "count").read_text()) >= 3  # it kept trying
