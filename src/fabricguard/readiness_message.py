"""The ``FabricReady`` condition's message as the agent writes it, and its one reader.

``agent.condition`` writes ``<lead>: <check>, <check> | <check>: <detail>; <check>: <detail>`` (the names always
fit in ``MAX_MESSAGE``; the details may be cut with ``…``). The controller's breakers (which checks fail), the
doctor's Lustre view (which ``lustre.*`` checks fail on each node, with the line each read) and the agent itself
read it here, so no two readers can disagree on where a name ends and its detail starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SEP = " | "
FAILED_LEADS = ("check(s) failed",)
WARNING_LEAD = "warnings"


@dataclass(frozen=True)
class Message:
    lead: str  # "2 check(s) failed", "5 check(s) passed; warnings", ... ("" when the message lists no check)
    checks: list[str] = field(default_factory=list)  # the listed checks, in order
    details: dict[str, str] = field(default_factory=dict)  # check -> its detail (cut where the message was)

    @property
    def failed(self) -> bool:
        return any(x in self.lead for x in FAILED_LEADS)

    @property
    def warnings(self) -> bool:
        return WARNING_LEAD in self.lead


def compose(lead: str, checks: list[tuple[str, str]], limit: int) -> str:
    """``lead: a, b | a: detail; b: detail`` within ``limit`` characters: the names always, details cut."""
    head = f"{lead}: {', '.join(n for n, _ in checks)}"
    details = "; ".join(f"{n}: {d}" for n, d in checks)
    room = limit - len(head) - len(SEP)
    if room <= 0:
        return head
    if len(details) > room:
        details = details[: max(room - 1, 0)] + "…"
    return f"{head}{SEP}{details}"


def parse(message: str) -> Message:
    """The lead, the listed checks and each one's detail of a message :func:`compose` wrote; a message in another
    form (``no check ran: …``) is all lead."""
    head, _, rest = message.partition(SEP)
    lead, sep, listed = head.partition(": ")
    names = [n.strip() for n in listed.split(",") if n.strip()] if sep else []
    if not names or any(" " in n for n in names):
        return Message(message)
    details: dict[str, str] = {}
    # Each detail runs to the next listed name's "; <name>: " (details may hold "; " themselves).
    starts: list[tuple[int, str]] = []
    pos = 0
    for i, n in enumerate(names):
        marker = f"{n}: " if i == 0 else f"; {n}: "
        at = rest.find(marker, pos) if not (i == 0 and rest.startswith(marker)) else 0
        if at < 0:
            break
        starts.append((at + len(marker), n))
        pos = at + len(marker)
    for j, (begin, n) in enumerate(starts):
        end = len(rest) if j + 1 == len(starts) else rest.rfind(f"; {starts[j + 1][1]}: ", begin, starts[j + 1][0])
        details[n] = rest[begin:end].strip()
    return Message(lead, names, details)
