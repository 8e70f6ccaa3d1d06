"""The FabricValidation status as a typed model: what the controller writes, and the CRD schema generated from it.

One object per pool keeps the pool's canary history (``runs``, newest first), the latest outcome, the last
success, the run in progress, and the ``Validated`` and ``RootCause`` conditions (``controller/rootcause.py``),
each with the ``observedGeneration`` it was computed for (``lastTransitionTime`` moves only when its status
changes, as apimachinery's ``SetStatusCondition``).
``status_schema()`` turns the model into the CRD's structural OpenAPI schema, so the schema the API server
enforces and the status the controller writes cannot drift apart.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fabricguard.controller.outcome import Outcome

MAX_RUNS = 50
MAX_CONDITIONS = 8
MAX_EVIDENCE = 10
MAX_PROOF_NODES = 5000


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StorageProofRow(_Model):
    """One canary run's storage proof (``controller.storage_proof.StorageProof`` as stored)."""

    outcome: Literal["passed", "degraded", "failed"]
    message: str = Field(default="", max_length=1000)
    nodes: int = Field(default=0, ge=0)
    writeMBps: float | None = Field(default=None, description="The canary nodes' write rates, summed.")
    readMBps: float | None = None
    floorWriteMBps: float | None = None
    floorReadMBps: float | None = None
    floorJudged: bool = False


class StorageStatus(_Model):
    """The pool's storage standing (controller/storage_proof.py): ready when the newest storage proof passed
    within two canary intervals."""

    ready: bool
    message: str = Field(default="", max_length=1024)
    run: str | None = Field(default=None, description="The canary run the standing is from.")
    lastProven: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    proof: StorageProofRow | None = None


class Run(_Model):
    """One canary run (``controller.outcome.CanaryRun`` as stored)."""

    name: str = Field(description="The canary JobSet (or skipped-<time>).")
    outcome: Outcome
    started: str = Field(json_schema_extra={"format": "date-time"})
    finished: str = Field(json_schema_extra={"format": "date-time"})
    message: str = ""
    evidence: list[str] = Field(default_factory=list, max_length=MAX_EVIDENCE)
    transport: str | None = None
    busbwGBps: dict[str, float] = Field(default_factory=dict)
    nodes: list[str] = Field(default_factory=list)
    inspectorBusbwGBps: dict[str, float] = Field(
        default_factory=dict, description="Median busbw per collective from NCCL's Inspector in the canary.")
    storage: StorageProofRow | None = Field(default=None, description="The run's storage probe, judged apart.")


class ActiveRun(_Model):
    jobSet: str
    started: str | None = Field(default=None, json_schema_extra={"format": "date-time"})


class Condition(_Model):
    """A metav1.Condition."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str = Field(max_length=32768)
    lastTransitionTime: str = Field(json_schema_extra={"format": "date-time"})
    observedGeneration: int | None = Field(default=None, ge=0)


class Breaker(_Model):
    """One check's blast-radius breaker on this pool (fabricguard/breaker.py, controller/blast.py)."""

    check: str = Field(description="The agent check (or FabricReady reason) the breaker is for.")
    open: bool
    since: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    reason: str | None = Field(default=None, max_length=1024)
    members: list[str] = Field(default_factory=list, max_length=1000, description="Nodes counted when it opened.")
    resets: int = Field(default=0, ge=0, description="Times a person reset it (fabricguard breaker reset).")
    resetAt: str | None = Field(default=None, json_schema_extra={"format": "date-time"})


class BlastBudget(_Model):
    """The pool's blast-radius budget as the controller last counted it (``agent/taint_slots.published``): the
    taint slots ``--manage-taints`` agents share."""

    nodes: int = Field(ge=0, description="The pool's nodes.")
    allowed: int = Field(ge=0, description="Nodes that may newly fail one check within the window (blastRadius): "
                         "the pool's taint slots.")
    windowSeconds: int = Field(ge=1)
    observedAt: str = Field(json_schema_extra={"format": "date-time"},
                            description="When it was counted (rewritten at least every 10 minutes).")


class NodeProofRow(_Model):
    """One node of the pool's proof table (``controller.proof.NodeProof`` as stored)."""

    node: str
    state: str = Field(description="proven, due, changed (driver, firmware or kernel changed since proven), "
                       "unproven, suspect, convicted, quarantined, held, new, timed-out, not-ready or busy.")
    lastProven: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    pair: str | None = Field(default=None, description="The pair test that last proved it.")
    partner: str | None = None
    busbwGBps: float | None = None
    link: str | None = Field(default=None, description="intra or cross: the block relation of that pair.")
    since: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    failures: list[str] = Field(default_factory=list, max_length=8, description="Partners of failed pairs.")
    rails: list[str] = Field(default_factory=list, max_length=8, description="Bad rails its failed pairs named "
                             "(rail k and this node's NIC on it: each rail timed alone by the pair test).")
    nics: dict[str, str] = Field(default_factory=dict, description="Those rails' NICs on this node and their PCI "
                                 "addresses (what a DeviceTaintRule selects on a DRA pool).")
    labels: dict[str, str] = Field(default_factory=dict)
    message: str = ""


class ActivePair(_Model):
    name: str
    nodes: list[str] = Field(min_length=2, max_length=2)
    purpose: str
    started: str = Field(json_schema_extra={"format": "date-time"})
    gpuHours: float = 0.0


class ProofStatus(_Model):
    """The pool's node proof (controller/proof.py): per-node table, running pairs, the day's GPU-hour spend and
    the quarantine breaker."""

    nodes: list[NodeProofRow] = Field(default_factory=list, max_length=MAX_PROOF_NODES)
    active: list[ActivePair] = Field(default_factory=list, max_length=256)
    day: str = ""
    spentGpuHours: float = 0.0
    budgetGpuHours: float = 0.0
    breaker: Breaker | None = Field(default=None, description="The quarantine breaker (check: node-quarantine).")
    failing: dict[str, str] | None = None
    recent: list[str] | None = None


class FabricValidationStatus(_Model):
    pool: str | None = None
    lastOutcome: Outcome | None = None
    lastRun: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    lastSuccess: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    active: ActiveRun | None = None
    runs: list[Run] = Field(default_factory=list, max_length=MAX_RUNS)
    proof: ProofStatus | None = None
    storage: StorageStatus | None = None
    conditions: list[Condition] = Field(default_factory=list, max_length=MAX_CONDITIONS,
                                        description="Validated, RootCause (controller/rootcause.py) and "
                                        "StorageReady.")
    breakers: list[Breaker] = Field(default_factory=list, max_length=64,
                                    description="Blast-radius breakers per check (controller/blast.py).")
    blastBudget: BlastBudget | None = Field(default=None, description="The pool's node count and blast-radius "
                                            "budget, for the agents' taint slots (agent/taint_slots.py).")


def _structural(node: Any, defs: dict[str, Any]) -> Any:
    """Pydantic's JSON schema as a Kubernetes structural schema: references inlined, ``X | None`` as X
    (an absent key), no titles, one ``type`` per node."""
    if isinstance(node, list):
        return [_structural(n, defs) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _structural(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in node:
        kinds = [k for k in node["anyOf"] if k.get("type") != "null"]
        if len(kinds) == 1:
            merged = {**{k: v for k, v in node.items() if k not in ("anyOf", "default")}, **kinds[0]}
            return _structural(merged, defs)
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k in ("title", "$defs", "default", "additionalProperties") and not (
                k == "additionalProperties" and isinstance(v, dict)):
            continue
        if k == "const":
            out["enum"] = [v]
            continue
        out[k] = _structural(v, defs) if k in ("properties", "items", "additionalProperties") else v
        if k == "properties":
            out[k] = {name: _structural(p, defs) for name, p in v.items()}
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    return out


def status_schema() -> dict[str, Any]:
    """The ``status`` schema of the FabricValidation CRD, generated from :class:`FabricValidationStatus`."""
    raw = FabricValidationStatus.model_json_schema()
    schema: dict[str, Any] = _structural(raw, raw.get("$defs", {}))
    for c, key in (("conditions", "type"), ("breakers", "check")):
        schema["properties"][c]["x-kubernetes-list-type"] = "map"
        schema["properties"][c]["x-kubernetes-list-map-keys"] = [key]
    return schema
