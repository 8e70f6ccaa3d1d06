"""fabricguard: make multi-node GPU training on Kubernetes predictable.

"The job ran" is not success. fabricguard proves which transport and storage path a job really used,
injects the fabric at admission, gates nodes on a positive readiness check, and audits clusters for
capabilities that nothing ever asked for.
"""

# The one version source: pyproject.toml reads it (dynamic version), `fabricguard --version` prints it, `render
# install` labels every object with it (app.kubernetes.io/version). Bump it with each release (CHANGELOG.md).
__version__ = "0.2.0"
