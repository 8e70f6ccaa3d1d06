"""Wire-level helpers shared by every part: YAML with source positions, small I/O adapters."""
