"""What the local rank server imports before it forks any rank: torch and torch.distributed, quietly.

The server (``collective._rank_context``) shares the starting command's stderr, so what importing torch warns
about itself (``Failed to initialize NumPy`` where NumPy is not installed: the probe never needs it) would land
in the middle of ``validate``'s report; each rank's own output goes to its file, and ``rank_main`` ignores
warnings the same way.
"""

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import torch
    import torch.distributed  # noqa: F401
