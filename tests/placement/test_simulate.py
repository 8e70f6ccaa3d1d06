"""The placement simulation: best fit in one block, waiting vs spreading, and the cross-block busbw penalty."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.placement.simulate import place, table

ROOT = Path(__file__).resolve().parents[2]
GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"


def test_required_takes_the_fullest_block_that_fits() -> None:
    o = place(4, "required", {"a": 12, "b": 5, "c": 4}, baseline_gbps=355, cross_block_factor=0.6)
    assert o.placed == {"c": 4} and o.busbw_gbps == 355


def test_required_waits_until_free_or_forever() -> None:
    assert place(8, "required", {"a": 6, "b": 6}, size={"a": 10, "b": 6}).waits == "until-free"
    assert place(16, "required", {"a": 12, "b": 4}).waits == "forever"


def test_preferred_spreads_over_fewest_blocks_and_pays_the_penalty() -> None:
    o = place(16, "preferred", {"a": 12, "b": 4, "c": 3}, baseline_gbps=355, cross_block_factor=0.6)
    assert o.placed == {"a": 12, "b": 4}
    assert o.busbw_gbps == 213.0
    assert "2 blocks" in o.describe()


def test_preferred_in_one_block_keeps_the_baseline_and_unknown_factor_is_unknown() -> None:
    assert place(4, "preferred", {"a": 12, "b": 4}, baseline_gbps=355).busbw_gbps == 355
    assert place(16, "preferred", {"a": 12, "b": 4}, baseline_gbps=355).busbw_gbps is None


def test_waiting_message_says_where_the_nodes_must_be_free() -> None:
    assert place(8, "required", {"a": 6, "b": 4}, size={"a": 12, "b": 4}).describe() == \
        "waits until 8 nodes are free in one block"
    assert place(16, "preferred", {"a": 6, "b": 4}, size={"a": 12, "b": 4}).describe() == "waits until 16 nodes are free"


def test_not_enough_nodes_anywhere() -> None:
    assert place(20, "preferred", {"a": 12, "b": 4}).waits == "forever"
    assert place(14, "unconstrained", {"a": 10, "b": 2}, size={"a": 12, "b": 4}).waits == "until-free"


def test_table_is_every_pair() -> None:
    rows = table([2, 4, 16], ["required", "preferred"], {"a": 12, "b": 4})
    assert [(o.gang, o.mode) for o in rows][:2] == [(2, "required"), (2, "preferred")] and len(rows) == 6
    with pytest.raises(ValueError):
        place(0, "required", {"a": 1})


def test_cli_json_on_the_gke_profile() -> None:
    import json

    r = CliRunner().invoke(app, ["placement", "simulate", "-p", str(GKE), "--free", "block-a=12,block-b=4",
                                 "--format", "json"])
    # A 16-node gang can never run with required topology on blocks of 12 and 4: the answer is failed.
    assert r.exit_code == 2, r.output
    data = json.loads(r.stdout)
    assert data["verdict"] == "failed"
    sixteen = {o["mode"]: o for o in data["outcomes"] if o["gang"] == 16}
    assert sixteen["required"]["waits"] == "forever"
    assert sixteen["preferred"]["busbwGBps"] == pytest.approx(355 * 0.6)


def test_verdict_follows_the_worst_gang() -> None:
    from fabricguard.placement.simulate import verdict

    free = {"a": 12, "b": 4}
    assert verdict(table([2, 4], ["required", "preferred"], free)) == "pass"
    assert verdict(table([14], ["preferred"], free)) == "degraded"  # spans blocks
    assert verdict(table([16], ["required"], free)) == "failed"  # never fits


@pytest.mark.parametrize("args", [["--free", "block-a"], ["--free", "a=1", "--gangs", "two"],
                                  ["--free", "a=4", "--size", "a=2"], ["--free", "a=4", "--pool", "nope"],
                                  ["--free", "a=4", "--format", "xml"]])
def test_cli_bad_input_is_one_line_exit_3(args: list[str]) -> None:
    r = CliRunner().invoke(app, ["placement", "simulate", "-p", str(GKE), *args])
    assert r.exit_code == 3, r.output
    assert "Traceback" not in r.output and r.stderr.startswith("error:")
