#!/usr/bin/env bash
# One-shot device proof on a machine with one H200 (no RDMA). < 4 minutes.
#  1. collective probe with NCCL on 1 rank, default environment: NCCL must pick Socket (nothing else exists);
#  2. the same with the pool's NCCL_NET forced (IB): NCCL must FAIL LOUDLY ("Failed to initialize any NET plugin");
#  3. GPU check (bf16 matmul TFLOPS, HBM d2d copy GB/s, pinned H2D/D2H GB/s) vs tests/fixtures/h200-gpu-ceilings.json;
#  4. host probe for the GKE RDMA pool (must be "not ready": no RDMA devices) with live NVML;
#  5. validate --local (gloo ranks + the GPU check) to show the whole report on a GPU host.
# The device image has torch with CUDA but no registry access: packages it lacks come as wheels in
# .devwheels/ (carried), and fabricguard runs from src/ without being installed.
# Results: $OUT/h200_check.log, a few JSON files, and $OUT/results.tar.gz with every per-rank NCCL log.
set -u
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/device-out}"
W=/tmp/fgdev
rm -rf "$W"; mkdir -p "$OUT" "$W/out"
exec > >(tee "$OUT/h200_check.log") 2>&1
start=$(date +%s)
echo "== host: $(hostname) $(date -u +%FT%TZ)"; nvidia-smi -L 2>&1 | head -4

PY=python3
if ! "$PY" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "NO TORCH WITH CUDA on this machine: the device checks need one." | tee "$OUT/NO_CUDA_TORCH"
  exit 3
fi
# The image's python3 is itself a venv holding torch (a venv or a symlink made from it loses torch), so the
# missing packages go into a target folder on PYTHONPATH instead.
mkdir -p "$W/site"; PY="$(command -v "$PY")"
if [ -d .devwheels ]; then "$PY" -m pip install -q --no-index --no-deps --target "$W/site" .devwheels/*.whl 2>&1 | tail -3; fi
export PYTHONPATH="$PWD/src:$W/site" PYTHONUNBUFFERED=1
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0), "nccl", torch.cuda.nccl.version())'

R="$W/out"

echo "== 1. NCCL, 1 rank, default (expect Socket, no failure)"
timeout 150 "$PY" -m fabricguard probe collective --local-ranks 1 --backend nccl -b 1M -e 1G -f 4 -w 3 -n 10 \
  --out "$R/nccl-default" --json > "$OUT/collective-default.json"; echo "exit $?"
"$PY" - "$OUT/collective-default.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); n = d.get("nccl") or {}
print("network", n.get("network"), "transport", d.get("transport"), "failed", d.get("failed"), "error", d.get("error"))
for r in d.get("rows", []): print(f"  {r['size']:>11} B  {r['time_us']:9.1f} us  algbw {r['algbw_gbps']:8.2f} GB/s  wrong {r['wrong']}")
PY

echo "== 2. NCCL, 1 rank, NCCL_NET=IB forced by the on-prem InfiniBand pool (expect a loud failure)"
timeout 120 "$PY" -m fabricguard probe collective --local-ranks 1 --backend nccl -b 1M -e 1M -w 1 -n 1 \
  --profile examples/profiles/onprem-infiniband.yaml --pool h100-ib \
  --out "$R/nccl-forced-ib" --json > "$OUT/collective-forced-ib.json"; echo "exit $?"
"$PY" - "$OUT/collective-forced-ib.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("failed", d.get("failed"), "| error:", d.get("error")); print("verdict", (d.get("judgement") or {}).get("status"))
PY
"$PY" -m fabricguard nccl inspect "$R/nccl-forced-ib" | head -12

echo "== 3. GPU check vs ceilings"
timeout 150 "$PY" bench/device/gpu_check.py --ceilings tests/fixtures/h200-gpu-ceilings.json | tee "$OUT/gpu.json"

echo "== 4. host probe, GKE RDMA pool, live NVML (expect not ready: no RDMA on this VM)"
timeout 60 "$PY" -m fabricguard probe host --profile examples/profiles/gke-a3-ultra.yaml --json > "$OUT/host.json"; echo "exit $?"
timeout 60 "$PY" -m fabricguard probe host --profile examples/profiles/gke-a3-ultra.yaml | tail -25

echo "== 5. validate --local on the GPU host"
timeout 150 "$PY" -m fabricguard validate --out "$R/validate-local" --gpu-ceilings tests/fixtures/h200-gpu-ceilings.json | tail -30
echo "exit ${PIPESTATUS[0]}"
tar -C "$W" -czf "$OUT/results.tar.gz" out
echo "== done in $(( $(date +%s) - start )) s"
