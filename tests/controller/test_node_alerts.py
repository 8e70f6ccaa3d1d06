"""The per-node fabric, Lustre and GPU alerts under ``promtool test rules``: each fires on its failure, and not on
the healthy series beside it. The agent's series carry ``instance``; fabricguard_agent_info names node and pool."""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_support import PROFILE
from promtool_support import run_promtool_tests

from fabricguard.controller.alerts import rule_groups
from fabricguard.profile import loads_profile

pytestmark = pytest.mark.external

PROF = loads_profile(PROFILE.replace("baseline: {allReduceBusBwGBps: 45}",
                                     "baseline: {allReduceBusBwGBps: 45, lustreRpcLatencyMs: 2}"))
INFO = [
    {"series": 'fabricguard_agent_info{instance="10.0.0.1:9100",node="gh-0",pool="gh200-roce"}', "values": "1x40"},
    {"series": 'fabricguard_agent_info{instance="10.0.0.2:9100",node="gh-1",pool="gh200-roce"}', "values": "1x40"},
]
PORT = 'device="mlx5_0",port="1"'


def _run(tmp_path: Path, series: list[dict], tests: list[dict]) -> None:
    r = run_promtool_tests(tmp_path, rule_groups(PROF), [{"interval": "1m", "input_series": INFO + series,
                                                          "alert_rule_test": tests}])
    assert r.returncode == 0, r.stdout + r.stderr


def _labels(instance: str, node: str, **extra: str) -> dict[str, str]:
    return {"instance": instance, "node": node, "pool": "gh200-roce", **extra}


def test_port_down_on_a_ready_node(tmp_path: Path) -> None:
    _run(tmp_path, [
        {"series": f'fabricguard_rdma_port_up{{instance="10.0.0.1:9100",{PORT},link_layer="InfiniBand"}}',
         "values": "1x10 0x30"},
        {"series": f'fabricguard_rdma_port_up{{instance="10.0.0.2:9100",{PORT},link_layer="InfiniBand"}}',
         "values": "0x40"},
        {"series": 'kube_node_status_condition{node="gh-0",condition="Ready",status="true"}', "values": "1x40"},
        # gh-1's port is down too, but the node is NotReady: the kubelet's own signal already keeps pods away.
        {"series": 'kube_node_status_condition{node="gh-1",condition="Ready",status="true"}', "values": "0x40"},
    ], [
        {"eval_time": "9m", "alertname": "FabricguardFabricPortDownOnReadyNode", "exp_alerts": []},
        {"eval_time": "14m", "alertname": "FabricguardFabricPortDownOnReadyNode", "exp_alerts": [
            {"exp_labels": {"severity": "critical", "device": "mlx5_0", "port": "1", "link_layer": "InfiniBand",
                            **_labels("10.0.0.1:9100", "gh-0")}}]},
    ])


def test_link_errors_rising(tmp_path: Path) -> None:
    _run(tmp_path, [
        {"series": f'fabricguard_rdma_port_symbol_errors_total{{instance="10.0.0.1:9100",{PORT}}}',
         "values": "7x20 12x20"},  # old errors are not news; new ones are
        {"series": f'fabricguard_rdma_port_link_downed_total{{instance="10.0.0.2:9100",{PORT}}}', "values": "3x40"},
    ], [
        {"eval_time": "15m", "alertname": "FabricguardRdmaLinkErrorsRising", "exp_alerts": []},
        {"eval_time": "25m", "alertname": "FabricguardRdmaLinkErrorsRising", "exp_alerts": [
            {"exp_labels": {"severity": "warning", "device": "mlx5_0", "port": "1",
                            **_labels("10.0.0.1:9100", "gh-0")}}]},
    ])


def test_lustre_latency_above_the_pools_baseline(tmp_path: Path) -> None:
    _run(tmp_path, [
        # gh-0: 100 RPCs a minute waiting 0.6 s in all: 6 ms each, over the 2 ms baseline. gh-1: 1 ms.
        {"series": 'fabricguard_lustre_client_rpc_wait_seconds_total{instance="10.0.0.1:9100",target="fs-OST0000"}',
         "values": "0+0.6x40"},
        {"series": 'fabricguard_lustre_client_rpcs_total{instance="10.0.0.1:9100",target="fs-OST0000"}',
         "values": "0+100x40"},
        {"series": 'fabricguard_lustre_client_rpc_wait_seconds_total{instance="10.0.0.2:9100",target="fs-OST0000"}',
         "values": "0+0.1x40"},
        {"series": 'fabricguard_lustre_client_rpcs_total{instance="10.0.0.2:9100",target="fs-OST0000"}',
         "values": "0+100x40"},
    ], [
        {"eval_time": "8m", "alertname": "FabricguardLustreLatencyHigh", "exp_alerts": []},
        {"eval_time": "20m", "alertname": "FabricguardLustreLatencyHigh", "exp_alerts": [
            {"exp_labels": {"severity": "warning", **_labels("10.0.0.1:9100", "gh-0")}}]},
    ])


def test_gpus_idle_while_traffic_goes_over_tcp(tmp_path: Path) -> None:
    _run(tmp_path, [
        {"series": 'DCGM_FI_DEV_GPU_UTIL{node="gh-0",gpu="0"}', "values": "12x40"},
        {"series": 'DCGM_FI_DEV_GPU_UTIL{node="gh-1",gpu="0"}', "values": "15x40"},
        {"series": 'node_infiniband_port_data_transmitted_bytes_total{node="gh-0",device="mlx5_0",port="1"}',
         "values": "5e9x40"},
        # gh-1 is idle on the GPUs too, but its RDMA ports move data: not a socket fallback.
        {"series": 'node_infiniband_port_data_transmitted_bytes_total{node="gh-1",device="mlx5_0",port="1"}',
         "values": "0+6e10x40"},
        {"series": 'node_network_transmit_bytes_total{node="gh-0",device="eth0"}', "values": "0+1.2e10x40"},
        {"series": 'node_network_transmit_bytes_total{node="gh-0",device="lo"}', "values": "0+9e10x40"},
        {"series": 'node_network_transmit_bytes_total{node="gh-1",device="eth0"}', "values": "0+1.2e10x40"},
    ], [
        {"eval_time": "8m", "alertname": "FabricguardGpuIdleOnSockets", "exp_alerts": []},
        {"eval_time": "20m", "alertname": "FabricguardGpuIdleOnSockets", "exp_alerts": [
            {"exp_labels": {"severity": "warning", "node": "gh-0"}}]},
    ])


def test_no_baseline_no_lustre_latency_rule() -> None:
    names = [r["alert"] for r in rule_groups(loads_profile(PROFILE))["groups"][0]["rules"]]
    assert "FabricguardLustreLatencyHigh" not in names and "FabricguardFabricPortDownOnReadyNode" in names
