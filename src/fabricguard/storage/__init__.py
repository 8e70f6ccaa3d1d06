"""Storage path: which filesystem really backs a path inside a pod (Lustre, or something slower)."""
