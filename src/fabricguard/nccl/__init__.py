"""NCCL transport intelligence: prove from a job's own logs which transport it really used."""

from fabricguard.nccl.report import Evidence, NcclReport, NcclTestsRow, NcclTestsTable, NetDevice
from fabricguard.nccl.scan import LogInputError, collect_files, inspect_paths

__all__ = [
    "Evidence",
    "LogInputError",
    "NcclReport",
    "NcclTestsRow",
    "NcclTestsTable",
    "NetDevice",
    "collect_files",
    "inspect_paths",
]
