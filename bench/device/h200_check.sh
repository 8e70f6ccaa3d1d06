#!/usr/bin/env bash
# One-shot device proof on a machine with one H200 (no RDMA). Writes everything under "$OUT"; < 4 minutes.
#  1. collective probe with NCCL on 1 rank, default environment: NCCL must pick Socket (nothing else exists);
#  2. the same with the pool's NCCL_NET forced (IB): NCCL must FAIL LOUDLY ("Failed to initialize any NET plugin");
#  3. GPU check (bf16 matmul TFLOPS, HBM d2d copy GB/s, pinned H2D/D2H GB/s) vs tests/fixtures/h200-gpu-ceilings.json;
#  4. host probe for the GKE RDMA pool (must be "not ready": no RDMA devices) with live NVML;
#  5. validate --local (gloo ranks + the GPU check) to show the whole report on a GPU host.
set -u
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/device-out}"
mkdir -p "$OUT"
exec > >(tee "$OUT/h200_check.log") 2>&1
start=$(date +%s)
echo "== host: $(hostname) $(date -u +%FT%TZ)"; nvidia-smi -L 2>&1 | head -4

# Python: reuse a torch with CUDA if one is installed (venv with system site packages), else say so and stop.
PY=python3
for cand in /opt/torch/.venv/bin/python python3; do
  if "$cand" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then PY=$cand; break; fi
done
if ! "$PY" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "NO TORCH WITH CUDA on this machine: the device checks need one (pip install torch with CUDA first)." | tee "$OUT/NO_CUDA_TORCH"
  exit 3
fi
"$PY" -m venv --system-site-packages "$OUT/venv" >/dev/null
V="$OUT/venv/bin"
"$V/pip" install -q -e '.[probe]' 2>&1 | tail -3
"$V/python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))' | tee "$OUT/torch.txt"
FG="$V/fabricguard"

echo "== 1. NCCL, 1 rank, default (expect Socket, no failure)"
timeout 120 "$FG" probe collective --local-ranks 1 --backend nccl -b 1M -e 256M -f 4 -w 3 -n 10 \
  --out "$OUT/nccl-default" --json > "$OUT/collective-default.json"; echo "exit $?" | tee "$OUT/collective-default.rc"
"$V/python" - "$OUT/collective-default.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); n = d.get("nccl") or {}
print("network", n.get("network"), "transport", d["transport"], "failed", d["failed"], "error", d["error"])
for r in d["rows"]: print(f"  {r['size']:>11} B  {r['time_us']:9.1f} us  algbw {r['algbw_gbps']:8.2f} GB/s  wrong {r['wrong']}")
PY

echo "== 2. NCCL, 1 rank, NCCL_NET=IB forced by the on-prem InfiniBand pool (expect a loud failure)"
timeout 120 "$FG" probe collective --local-ranks 1 --backend nccl -b 1M -e 1M -w 1 -n 1 \
  --profile examples/profiles/onprem-infiniband.yaml --pool h100-ib \
  --out "$OUT/nccl-forced-ib" --json > "$OUT/collective-forced-ib.json"; echo "exit $?" | tee "$OUT/collective-forced-ib.rc"
"$V/python" - "$OUT/collective-forced-ib.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("failed", d["failed"], "| error:", d["error"]); print("verdict", (d.get("judgement") or {}).get("status"))
PY

echo "== 3. GPU check vs ceilings"
timeout 120 "$V/python" bench/device/gpu_check.py --ceilings tests/fixtures/h200-gpu-ceilings.json | tee "$OUT/gpu.json"

echo "== 4. host probe, GKE RDMA pool, live NVML (expect not ready: no RDMA on this VM)"
timeout 60 "$FG" probe host --profile examples/profiles/gke-a3-ultra.yaml --json > "$OUT/host.json"; echo "exit $?"
"$FG" probe host --profile examples/profiles/gke-a3-ultra.yaml | tail -20

echo "== 5. validate --local on the GPU host"
timeout 120 "$FG" validate --out "$OUT/validate-local" --gpu-ceilings tests/fixtures/h200-gpu-ceilings.json | tail -25
echo "exit $?"
echo "== done in $(( $(date +%s) - start )) s; results in $OUT"
