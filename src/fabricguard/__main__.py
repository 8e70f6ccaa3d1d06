"""Allow ``python -m fabricguard``."""

from fabricguard.cli import main

main()
