#!/usr/bin/env bash
# Issue 10 §6, prepared for a session that is lent the H200 device (this one was not; nothing here has run on it).
# On the real GPU node without RDMA, the agent checking itself for a fabric pool must refuse the node, naming
# the missing RDMA devices, modules, plugin and Lustre, while GPU health (live NVML: ECC, row remapping) passes.
# There is no cluster on the device, so fabric.allocatable fails closed ("cannot read the Node object").
#
# The device image lacks the agent's pure-Python dependencies: download them here and carry them:
#   pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 --implementation cp \
#     -d .devwheels pydantic typer rich pyyaml prometheus-client kr8s jsonpatch nvidia-ml-py
#   then run through the device tool with carry=[".devwheels"]:  bash bench/agent/h200_agent_check.sh
# Output: $OUT/agent-gke.json, $OUT/agent-onprem.json, $OUT/agent_check.log (copy them to bench/device/).
set -u
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/device-out}"
W=/tmp/fgagent
rm -rf "$W"; mkdir -p "$OUT" "$W/site"
exec > >(tee "$OUT/agent_check.log") 2>&1
echo "== host: $(hostname) $(date -u +%FT%TZ)"; nvidia-smi -L 2>&1 | head -2
PY="$(command -v python3)"
if [ -d .devwheels ]; then "$PY" -m pip install -q --no-index --no-deps --target "$W/site" .devwheels/*.whl 2>&1 | tail -3; fi
export PYTHONPATH="$PWD/src:$W/site" PYTHONUNBUFFERED=1 KUBECONFIG=/nonexistent
for p in gke-a3-ultra:h200-rdma onprem-infiniband:h100-ib; do
  prof=${p%%:*}; pool=${p##*:}
  echo "== agent --once --dry-run, profile $prof pool $pool, live NVML, real /"
  /usr/bin/time -v "$PY" -m fabricguard.agent --once --dry-run --format json --node "$(hostname)" \
    --profile "examples/profiles/$prof.yaml" --pool "$pool" > "$OUT/agent-${prof%%-*}.json" 2> "$W/time.txt"
  echo "exit $? (expect 2)"; grep -E "Maximum resident|Elapsed" "$W/time.txt"
  "$PY" - "$OUT/agent-${prof%%-*}.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(d["status"], d["reason"], "|", d["message"].split(" | ")[0])
for c in d["checks"]:
    print(f"  {c['status']:>8} {c['name']}: {c['detail'][:150]}")
PY
done
