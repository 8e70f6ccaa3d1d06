# fabricguard image: the admission webhook (and the other CPU-side commands), for linux/amd64 and linux/arm64.
# Build both architectures into one index and deploy it by digest (`fabricguard render webhook --image repo@sha256:…`):
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/fabricguard:VERSION --push .
# The `probe` extra (torch, NVML) is not installed: the webhook never imports it. Dependencies are pinned by
# constraints.txt; pin the base too: --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:<index digest>
# (not written here: the build machines cannot reach the registry to read it).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml constraints.txt README.md* LICENSE ./
COPY src ./src
# A wheel of fabricguard plus wheels of its runtime dependencies, for the platform being built.
RUN python -m pip wheel --wheel-dir /wheels -c constraints.txt .

FROM ${PYTHON_IMAGE} AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN groupadd --system --gid 65532 fabricguard \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin fabricguard
COPY --from=build /wheels /wheels
RUN python -m pip install --no-index --find-links /wheels fabricguard && rm -rf /wheels \
 && python -c "import fabricguard.admission.server, sys; assert 'torch' not in sys.modules"
USER 65532:65532
# 8443: the HTTPS webhook; 8081: plain-HTTP /healthz, /readyz and /metrics (probes, Prometheus).
EXPOSE 8443 8081
# SIGTERM drains (not ready, keeps answering, then finishes in-flight requests); preStop in the manifest
# runs `sleep`, which the slim base image provides.
STOPSIGNAL SIGTERM
ENTRYPOINT ["fabricguard"]
CMD ["admission", "serve", "--help"]
