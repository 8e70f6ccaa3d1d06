"""A Lustre client's files in Lustre's own layout, for node trees (tests/probes, the agent's fixture).

The ``import`` file follows lprocfs_import_seq_show (lustre-release ``obdclass/lprocfs_status.c``).
"""

from __future__ import annotations


def lustre_import(device: str, target: str, state: str, server: str, version: str = "2.15.4.0") -> str:
    """An OSC/MDC ``import`` file in the layout of lprocfs_import_seq_show (lustre-release obdclass)."""
    return f"""import:
    name: {device}
    target: {target}_UUID
    state: {state}
    connect_flags: [ write_grant, server_lock, version, request_portal, adaptive_timeouts, lru_resize, jobstats ]
    connect_data:
       flags: 0xa0425af2e3440078
       instance: 39
       target_version: {version}
    import_flags: [ replayable, pingable, connect_tried ]
    connection:
       failover_nids: [ "{server}" ]
       nids_stats:
          "{server}": {{ connects: 1, replied: 1, uptodate: true, sec_ago: 5012 }}
       current_connection: "{server}"
       connection_attempts: 1
       generation: 1
       in-progress_invalidations: 0
       idle: 5 sec
    rpcs:
       inflight: 0
       unregistering: 0
       timeouts: 0
       avg_waittime: 1021 usec
    service_estimates:
       services: 1 sec
       network: 1 sec
    transactions:
       last_replay: 0
       peer_committed: 0
       last_checked: 0
"""
