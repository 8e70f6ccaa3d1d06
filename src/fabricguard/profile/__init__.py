"""The platform profile: pools, fabrics, storage, queues and baselines that every part reads."""

from fabricguard.profile.loader import ProfileError, embedded_profile, load_profile, loads_profile
from fabricguard.profile.model import (
    DEFAULT_NCCL_NET,
    EXPECTED_TRANSPORTS,
    Architecture,
    Baseline,
    Dra,
    Environment,
    Fabric,
    FabricType,
    PlatformProfile,
    Pool,
    Transport,
    UnknownPoolError,
)

__all__ = [
    "DEFAULT_NCCL_NET",
    "EXPECTED_TRANSPORTS",
    "Architecture",
    "Baseline",
    "Dra",
    "Environment",
    "Fabric",
    "FabricType",
    "PlatformProfile",
    "Pool",
    "ProfileError",
    "Transport",
    "UnknownPoolError",
    "embedded_profile",
    "load_profile",
    "loads_profile",
]
