"""NCCL's interface lists (``NCCL_SOCKET_IFNAME``, ``NCCL_OOB_NET_IFNAME``), parsed the way NCCL parses them.

One parser for the webhook (which adds interfaces a fabric must never use) and the profile (which refuses an
include list that picks one). NCCL (``src/os/linux.cc`` ``ncclOsFindInterfaces``, ``src/misc/utils.cc``
``matchIfList``): a leading ``^`` makes the list an exclusion, then a leading ``=`` makes every entry an exact
name instead of a prefix; entries are comma-separated. So ``^=eth1`` excludes ``eth1`` only, ``^eth`` every
``eth*``, ``=eth0`` picks ``eth0`` only and ``eth`` picks every ``eth*``. An exclusion with no entries excludes
nothing; an include list with none includes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IfnameList:
    """A parsed ``NCCL_SOCKET_IFNAME`` value."""

    exclude: bool  # "^": the entries are what NCCL must not use
    exact: bool  # "=": entries are whole names, not prefixes
    entries: tuple[str, ...]

    @classmethod
    def parse(cls, value: str) -> IfnameList:
        exclude = value.startswith("^")
        rest = value[1:] if exclude else value
        exact = rest.startswith("=")
        rest = rest[1:] if exact else rest
        return cls(exclude, exact, tuple(p for p in (x.strip() for x in rest.split(",")) if p))

    def matches(self, name: str) -> bool:
        """Whether an entry names the interface (exactly, or as a prefix)."""
        return any(name == p if self.exact else name.startswith(p) for p in self.entries)

    def excludes(self, name: str) -> bool:
        """Whether NCCL would never use the interface under this value."""
        return self.matches(name) if self.exclude else not self.matches(name)

    def excluding(self, interface: str, prefix: str) -> IfnameList:
        """The same exclusion with ``interface`` excluded too: ``prefix`` in a prefix list (every interface it
        starts, e.g. ``pod-id-link``), the interface's own name in an exact list (``^=`` cannot name a prefix).
        An include list is returned as it is: it is refused, not extended (see ``excludes``)."""
        if not self.exclude or self.excludes(interface):
            return self
        return IfnameList(True, self.exact, (*self.entries, interface if self.exact else prefix))

    def __str__(self) -> str:
        return ("^" if self.exclude else "") + ("=" if self.exact else "") + ",".join(self.entries)
