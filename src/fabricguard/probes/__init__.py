"""probes (see commands.py)."""
