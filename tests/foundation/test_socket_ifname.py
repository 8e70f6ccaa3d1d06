"""One NCCL_SOCKET_IFNAME parser (issue 27): NCCL's own rules, used by the webhook and the profile.

NCCL (src/os/linux.cc ncclOsFindInterfaces, src/misc/utils.cc matchIfList): "^" excludes, then "=" makes
entries exact names; otherwise entries are prefixes.
"""

from __future__ import annotations

import pytest

from fabricguard.admission.mutate import socket_ifname
from fabricguard.profile.model import FabricType
from fabricguard.socket_ifname import IfnameList


@pytest.mark.parametrize(
    ("value", "name", "excluded"),
    [
        ("^=eth1", "eth1", True),
        ("^=eth1", "eth10", False),  # exact: eth10 is not eth1
        ("^eth1", "eth10", True),  # prefix
        ("^=lo,docker", "docker0", False),
        ("^lo,docker", "docker0", True),
        ("=eth0", "eth0", False),
        ("=eth0", "eth01", True),
        ("eth", "eth7", False),
        ("eth", "ens5", True),
        ("^", "anything", False),  # an empty exclusion excludes nothing
        ("", "anything", True),  # an empty include list includes nothing
    ],
)
def test_excludes_follows_nccl(value: str, name: str, excluded: bool) -> None:
    assert IfnameList.parse(value).excludes(name) is excluded


def test_round_trip() -> None:
    for v in ("^=lo,docker", "^lo", "=eth0,eth1", "eth"):
        assert str(IfnameList.parse(v)) == v


def test_webhook_exact_exclusion_gets_the_interface_name_not_a_prefix() -> None:
    # "^=" lists are exact: adding the prefix "pod-id-link" would exclude nothing real.
    assert socket_ifname(FabricType.efa, "^=lo,docker") == "^=lo,docker,pod-id-link0"
    assert socket_ifname(FabricType.efa, "^=pod-id-link") == "^=pod-id-link,pod-id-link0"
    assert socket_ifname(FabricType.efa, "^=pod-id-link0") == "^=pod-id-link0"
    assert socket_ifname(FabricType.efa, "^lo") == "^lo,pod-id-link"
    assert IfnameList.parse(socket_ifname(FabricType.efa, "^=lo") or "").excludes("pod-id-link0")
