"""doctor (see commands.py)."""
