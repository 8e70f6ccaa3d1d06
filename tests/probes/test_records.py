"""The probes' result documents read back as typed records: what the writers produce round-trips, and a document
a tenant's image could have written in another shape is refused naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricguard.probes.bw import make_row
from fabricguard.probes.collective import CollectiveResult
from fabricguard.probes.records import CollectiveRecord, RecordError, StorageRecord
from fabricguard.probes.result import Check, Status
from fabricguard.probes.storage import StorageReport


def test_a_collective_result_round_trips() -> None:
    row = make_row("all_reduce", 1 << 30, "float", 16, 0.012, 0)
    res = CollectiveResult("nccl", 16, [row], False, None, "/tmp/x", {"NCCL_DEBUG": "INFO"}, "ib", "NET/IB")
    rec = CollectiveRecord.from_dict(json.loads(json.dumps(res.to_dict())))
    assert (rec.backend, rec.world_size, rec.failed, rec.transport) == ("nccl", 16, False, "ib")
    assert rec.rows == [row]


def test_a_storage_report_round_trips() -> None:
    rep = StorageReport("/lustre", "builtin", Status.degraded,
                        [Check("storage.throughput", Status.degraded, "write 100 MB/s under the floor")])
    rec = StorageRecord.from_dict(json.loads(json.dumps(rep.to_dict())))
    assert rec.status is Status.degraded and rec.checks == rep.checks[:1]


@pytest.mark.parametrize(("doc", "field"), [
    ([], "not an object"),
    ({"backend": "nccl", "world_size": "16"}, "world_size"),
    ({"backend": "nccl", "world_size": True}, "world_size"),
    ({"backend": "nccl", "world_size": 2, "rows": [{"collective": "all_reduce"}]}, "rows[0]"),
    ({"backend": "nccl", "world_size": 2, "rows": "lots"}, "rows"),
])
def test_a_collective_document_of_another_shape_is_refused_naming_the_field(doc: object, field: str) -> None:
    with pytest.raises(RecordError, match=field.replace("[", r"\[").replace("]", r"\]")):
        CollectiveRecord.from_dict(doc)


def test_a_storage_document_with_an_unknown_status_is_refused() -> None:
    with pytest.raises(RecordError, match=r"checks\[0\].status"):
        StorageRecord.from_dict({"status": "pass", "checks": [{"name": "x", "status": "fine"}]})


def test_the_canary_judgement_names_a_result_file_of_another_shape(tmp_path: Path) -> None:
    from fabricguard.controller.outcome import Outcome, judge_canary
    from fabricguard.profile import load_profile

    prof = load_profile(Path(__file__).resolve().parents[2] / "examples" / "profiles" / "gke-a3-ultra.yaml")
    results = tmp_path / "results"
    results.mkdir()
    (results / "collective.rank0.json").write_text(json.dumps({"backend": "nccl", "world_size": "two"}))
    j = judge_canary(prof, prof.pool(), tmp_path, tmp_path / "logs", results)
    assert j.outcome is Outcome.failed and "collective.rank0.json: not the probe's result (world_size" in j.message
