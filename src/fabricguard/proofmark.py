"""A node's pair-test proof as the Node itself carries it: one writer, one reader.

The controller's proof (``controller/pairs.py``) leaves two marks on each Node it proves or names: the
``fabricguard.io/last-proven`` annotation (``<time> pair=<run> partner=<node> busbw=<x>GB/s link=<intra|cross>``)
and the ``FabricProven`` condition (True ``PairTestPassed``; False ``Convicted``, ``ProofTimedOut`` or
``ChangedSinceProof``). The doctor sits below the controller and reads Nodes, not the controller's tables: it
reads these marks through :func:`node_mark`, so the annotation has one format and one parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fabricguard import names, objects, times

_MAX_CHARS = 512  # an annotation longer than this is not ours (the writer stays far below)


@dataclass(frozen=True)
class LastProven:
    """The ``fabricguard.io/last-proven`` annotation, parsed."""

    when: datetime
    pair: str
    partner: str
    busbw_gbps: float | None
    link: str | None


def busbw_text(v: float | None) -> str:
    return f"{v:.1f} GB/s" if v is not None else "no busbw"


def format_last_proven(when: str, pair: str | None, partner: str | None, busbw: float | None,
                       link: str | None) -> str:
    return (f"{when} pair={pair} partner={partner} busbw={busbw_text(busbw).replace(' ', '')}"
            + (f" link={link}" if link else ""))


def parse_last_proven(text: Any) -> LastProven | None:
    """The annotation's fields, or None when it is absent or not in :func:`format_last_proven`'s form."""
    if not isinstance(text, str) or not text or len(text) > _MAX_CHARS:
        return None
    head, *rest = text.split()
    when = times.parse_time(head)
    fields = dict(part.split("=", 1) for part in rest if "=" in part)
    if when is None or not fields.get("pair"):
        return None
    bw: float | None = None
    raw = fields.get("busbw", "")
    if raw.endswith("GB/s"):
        try:
            bw = float(raw[:-4])
        except ValueError:
            bw = None
    return LastProven(when, fields["pair"], fields.get("partner", ""), bw, fields.get("link") or None)


@dataclass(frozen=True)
class NodeMark:
    """What a Node says about its proof: the last passing pair test and the current ``FabricProven``."""

    node: str
    last: LastProven | None
    proven: str | None  # FabricProven's status: "True", "False", "Unknown", or None when absent
    reason: str
    message: str
    since: datetime | None  # FabricProven's lastTransitionTime

    def result(self, every_s: float, now: datetime) -> str:
        """``proven`` (within ``every_s``), ``stale``, ``never``, or the reason FabricProven is False."""
        if self.proven == "False":
            return self.reason or "not-proven"
        if self.last is None:
            return "never"
        return "proven" if (now - self.last.when).total_seconds() <= every_s else "stale"


def node_mark(node: dict[str, Any]) -> NodeMark:
    ann = (objects.meta(node).get("annotations") or {}).get(names.ANN_LAST_PROVEN)
    cond = objects.find_condition(node, names.FABRIC_PROVEN) or {}
    status = cond.get("status")
    return NodeMark(objects.name_of(node), parse_last_proven(ann), str(status) if status else None,
                    str(cond.get("reason") or ""), str(cond.get("message") or "")[:300],
                    times.parse_time(cond.get("lastTransitionTime")) if cond else None)
