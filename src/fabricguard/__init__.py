"""fabricguard: make multi-node GPU training on Kubernetes predictable.

"The job ran" is not success. fabricguard proves which transport and storage path a job really used,
injects the fabric at admission, gates nodes on a positive readiness check, and audits clusters for
capabilities that nothing ever asked for.
"""

__version__ = "0.1.0"
