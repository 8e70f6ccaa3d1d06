"""admission (see commands.py)."""
