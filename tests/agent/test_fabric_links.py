"""The ``FabricLinks`` condition (agent/links.py): each port's state and counters against the previous run, so
a dead or flapping link reads differently from an idle one; written with FabricReady and alone only when its
status or reason changes; the own-node admission policy lets the agent (and not the sweep) write it."""

from __future__ import annotations

from pathlib import Path

from agent_support import NODE_NAME, evaluate_policy
from test_agent_live import Clock, condition, make_agent

from fabricguard.agent.links import MAX_MESSAGE, LinkWatch
from fabricguard.agent.render import admission_policy

PORTS = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"]


def set_counters(root: Path, dev: str, **values: int) -> None:
    """Write PMA counters as the kernel shows them (``port_*_data`` in 4-octet words) or hw_counters."""
    files = {"rx_words": "counters/port_rcv_data", "tx_words": "counters/port_xmit_data",
             "downed": "counters/link_downed", "symbol": "counters/symbol_error",
             "rcv_err": "counters/port_rcv_errors", "ack_timeout": "hw_counters/local_ack_timeout_err",
             "hw_rx_bytes": "hw_counters/rx_bytes", "hw_tx_bytes": "hw_counters/tx_bytes"}
    for k, v in values.items():
        p = root / "sys/class/infiniband" / dev / "ports/1" / files[k]
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"{v}\n")


def zero(root: Path) -> None:
    for dev in PORTS:
        set_counters(root, dev, rx_words=0, tx_words=0, downed=0, symbol=0, rcv_err=0)


def test_a_flapping_link_errors_and_an_idle_port_read_differently(healthy_root: Path) -> None:
    zero(healthy_root)
    w = LinkWatch()
    status, reason, msg = w.judge(healthy_root, 0.0)
    assert (status, reason) == ("True", "LinksHealthy") and "first reading" in msg and "8 port(s) up" in msg
    # A minute of traffic on every port: 11 GB/s each way (PMA words x 4).
    for dev in PORTS:
        set_counters(healthy_root, dev, rx_words=11_000_000_000 * 60 // 4, tx_words=10_000_000_000 * 60 // 4)
    status, reason, msg = w.judge(healthy_root, 60.0)
    assert (status, reason) == ("True", "LinksHealthy")
    assert "mlx5_0/1 up 400G rx 11 GB/s, tx 10 GB/s over 60 s errors 0" in msg
    # A minute of nothing moved and nothing wrong: an idle fabric (a stuck process), links fine.
    status, reason, msg = w.judge(healthy_root, 120.0)
    assert (status, reason) == ("True", "LinksHealthy") and "rx 0 B/s, tx 0 B/s over 60 s" in msg
    # Symbol errors rising on one port; the link went down and up on another.
    set_counters(healthy_root, "mlx5_5", symbol=12, ack_timeout=3)
    set_counters(healthy_root, "mlx5_2", downed=1)
    status, reason, msg = w.judge(healthy_root, 180.0)
    assert (status, reason) == ("False", "LinkFlapped")
    assert msg.startswith("8 port(s), 2 in trouble: mlx5_2/1 up 400G") and "downed 1(+1)" in msg
    assert "mlx5_5/1 up 400G rx 0 B/s, tx 0 B/s over 60 s symbol 12(+12), ack_timeout 3" in msg
    # Nothing rose since: the totals stay in the message, the condition is healthy again.
    status, reason, msg = w.judge(healthy_root, 240.0)
    assert (status, reason) == ("True", "LinksHealthy") and "(+" not in msg
    assert "mlx5_5/1 up 400G rx 0 B/s, tx 0 B/s over 60 s no error rose" in msg
    # A port that is down comes first.
    (healthy_root / "sys/class/infiniband/mlx5_7/ports/1/state").write_text("1: DOWN\n")
    (healthy_root / "sys/class/infiniband/mlx5_7/ports/1/phys_state").write_text("3: Disabled\n")
    status, reason, msg = w.judge(healthy_root, 300.0)
    assert (status, reason) == ("False", "LinkDown") and ": mlx5_7/1 DOWN/Disabled 400G" in msg


def test_efa_bytes_from_hw_counters_a_reset_and_no_ports(tmp_path: Path, healthy_root: Path) -> None:
    for dev in PORTS:
        set_counters(healthy_root, dev, hw_rx_bytes=1000, hw_tx_bytes=0)
    w = LinkWatch()
    w.judge(healthy_root, 0.0)
    set_counters(healthy_root, "mlx5_0", hw_rx_bytes=2_000_000_000 + 1000, downed=0)
    _, _, msg = w.judge(healthy_root, 10.0)
    assert "mlx5_0/1 up 400G rx 200 MB/s, tx 0 B/s over 10 s" in msg
    assert w.judge(tmp_path, 0.0) == ("Unknown", "NoPorts", "no RDMA port under /sys/class/infiniband")


def test_the_message_is_bounded_and_troubled_ports_stay_in_it(healthy_root: Path) -> None:
    zero(healthy_root)
    base = healthy_root / "sys/class/infiniband"
    for i in range(8, 64):  # a node with 64 ports
        (base / f"mlx5_{i}").symlink_to(base / "mlx5_0", target_is_directory=True)
    w = LinkWatch()
    w.judge(healthy_root, 0.0)
    set_counters(healthy_root, "mlx5_3", symbol=5)
    status, reason, msg = w.judge(healthy_root, 60.0)
    assert len(msg) <= MAX_MESSAGE and msg.endswith("…")
    assert (status, reason) == ("False", "LinkErrors") and "mlx5_3/1" in msg[:200]


async def test_written_with_fabric_ready_and_alone_only_when_it_changes(apiserver, tmp_path, healthy_root) -> None:
    k8s, url = apiserver
    k8s.policies = admission_policy("fabricguard-system")  # the agent's writes pass its own admission policy
    zero(healthy_root)
    clock = Clock()
    agent = await make_agent(tmp_path, url, healthy_root, clock=clock)
    status_writes = lambda: [p for p in k8s.patches if p[0] == "status"]  # noqa: E731
    await agent.run_once()
    c = condition(k8s, "FabricLinks")
    assert c is not None and (c["status"], c["reason"]) == ("True", "LinksHealthy")
    assert c["lastHeartbeatTime"] == "2026-11-30T10:00:00Z" and len(status_writes()) == 1
    # Traffic moved, nothing else changed: no write (the counters refresh with the heartbeat).
    for dev in PORTS:
        set_counters(healthy_root, dev, rx_words=10**9, tx_words=10**9)
    clock.tick(60)
    await agent.run_once()
    assert len(status_writes()) == 1
    # Errors rise: FabricLinks alone is written at once, FabricReady untouched.
    set_counters(healthy_root, "mlx5_4", rcv_err=7)
    clock.tick(60)
    await agent.run_once()
    assert len(status_writes()) == 2
    _, _, body = status_writes()[-1]
    assert [x["type"] for x in body["status"]["conditions"]] == ["FabricLinks"]
    c = condition(k8s, "FabricLinks")
    assert c is not None and (c["status"], c["reason"]) == ("False", "LinkErrors") and "rcv_err 7(+7)" in c["message"]
    assert c["lastTransitionTime"] == "2026-11-30T10:02:00Z"
    ready = condition(k8s)
    assert ready is not None and ready["lastHeartbeatTime"] == "2026-11-30T10:00:00Z"
    # The heartbeat carries fresh counters with FabricReady.
    for _ in range(3):
        clock.tick(60)
        await agent.run_once()
    c = condition(k8s, "FabricLinks")
    assert c is not None and c["lastHeartbeatTime"] == "2026-11-30T10:05:00Z" and len(status_writes()) == 4


def test_the_sweep_may_not_touch_fabric_links() -> None:
    from agent_support import healthy_node

    policy = admission_policy("fabricguard-system")[0]
    sweep = {"username": "system:serviceaccount:fabricguard-system:fabricguard-agent-sweep"}
    own = {"username": "system:serviceaccount:fabricguard-system:fabricguard-agent",
           "extra": {"authentication.kubernetes.io/node-name": [NODE_NAME]}}
    old = healthy_node()
    old["status"]["conditions"] += [
        {"type": "FabricReady", "status": "True", "reason": "AllChecksPassed", "message": "ok"},
        {"type": "FabricLinks", "status": "True", "reason": "LinksHealthy", "message": "8 port(s) up"}]
    new = healthy_node()
    new["status"]["conditions"] = [*old["status"]["conditions"][:-2],
                                   {"type": "FabricReady", "status": "Unknown", "reason": "HeartbeatStale",
                                    "message": "stale"},
                                   {"type": "FabricLinks", "status": "False", "reason": "LinkDown", "message": "x"}]
    assert evaluate_policy(policy, sweep, "status", old, new) is not None
    assert evaluate_policy(policy, own, "status", old, new) is None
    two = healthy_node()
    two["status"]["conditions"] = [*new["status"]["conditions"], new["status"]["conditions"][-1]]
    assert "at most one" in (evaluate_policy(policy, own, "status", old, two) or "")




async def test_an_older_policy_refusing_fabric_links_does_not_stop_the_heartbeat(apiserver, tmp_path,
                                                                                healthy_root) -> None:
    """The agent's image bumped alone (``kubectl set image``), its own-node policy still the release before
    FabricLinks: the policy refuses the write that carries both conditions. FabricReady is written alone then,
    and the error names what was refused, so the sweep never marks a healthy pool Unknown for it."""
    k8s, url = apiserver
    older = admission_policy("fabricguard-system")
    spec = older[0]["spec"]
    for v in spec["variables"]:  # the release before: every condition but FabricReady is another's
        v["expression"] = v["expression"].replace("(variables.isSweep || c.type != 'FabricLinks')", "true")
    k8s.policies = older
    zero(healthy_root)
    agent = await make_agent(tmp_path, url, healthy_root, clock=Clock())
    res = await agent.run_once()
    ready = condition(k8s)
    assert ready is not None and (ready["status"], ready["reason"]) == ("True", "AllChecksPassed"), res.errors
    assert condition(k8s, "FabricLinks") is None
    assert len(res.errors) == 1 and "FabricLinks" in res.errors[0] and "FabricReady written alone" in res.errors[0]
