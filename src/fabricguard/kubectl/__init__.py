"""The kubectl plugin ``kubectl fabricguard`` (an executable named ``kubectl-fabricguard``, installed with the
package): ``why JOB`` and ``pools``, answered from the cluster (fabricguard/controller/why.py)."""
