"""The node agent: a DaemonSet that proves its own node's fabric and reports it as the ``FabricReady`` condition.

Pure rules (``condition``, ``damping``, ``staleness``, ``taints``, ``checks``) are apart from I/O (``kube`` for
the API server, ``server`` for ``/healthz`` and ``/metrics``, ``loop`` for the schedule); ``render`` writes the
NodeReadinessRules, the DaemonSet and the policy that keeps each agent to its own Node.
"""
