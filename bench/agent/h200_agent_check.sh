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
#
# Issue 21, second part (FG_CHECKS="agent inspector" runs both; "inspector" only that part): NCCL's Inspector on
# the device's own NCCL. Prepared for a session lent the device; NOT RUN in the session that wrote it (no GPU was
# lent). The device cannot reach GitHub, so the plugin's source for the device's NCCL travels in .devnccl/ (an
# ignored folder; carry it too). Prepare here, for the NCCL the device's torch reports (2.28.9 on 2026-11-30):
#   mkdir -p .devnccl/2.28.9 && git -C /work/.mirror/NVIDIA+nccl/repo archive v2.28.9-1 ext-profiler/inspector \
#     | tar -x -C .devnccl/2.28.9          # 2.29.7 and later: plugins/profiler/inspector
#   (cd .devnccl/2.28.9/ext-profiler/inspector && sed -i 's/-march=native//' Makefile && make) && \
#     cp .devnccl/2.28.9/ext-profiler/inspector/libnccl-profiler-inspector.so .devnccl/2.28.9/   # if no g++ there
# Then: FG_CHECKS=inspector bash bench/agent/h200_agent_check.sh   (device tool: carry=[".devwheels", ".devnccl"])
# It builds libnccl-profiler-inspector.so against the device's NCCL version, runs the NCCL collective probe (one
# rank: the only GPU) with NCCL_PROFILER_PLUGIN, NCCL_INSPECTOR_ENABLE=1 and a 1 s dump interval, and keeps under
# $OUT/inspector/: the plugin's real records (<hostname>-pid<pid>.log), the rank's NCCL log (which must say
# "PROFILER/Plugin: Loaded Inspector (v5)"), nccl inspect's JSON and fabricguard's reading of the records. Copy
# $OUT/inspector to bench/device/inspector/ and tests/fixtures/inspector/device-<nccl version>/ with that version.
# One rank on one GPU moves no data (busbw 0 by nccl-tests' formula) and its communicator has nnodes 1, which
# fabricguard leaves out: the run proves the format, the file layout and the loading, not a fabric's figure.
set -u
FG_CHECKS="${FG_CHECKS:-agent inspector}"
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/device-out}"
W=/tmp/fgagent
rm -rf "$W"; mkdir -p "$OUT" "$W/site"
exec > >(tee "$OUT/agent_check.log") 2>&1
echo "== host: $(hostname) $(date -u +%FT%TZ)"; nvidia-smi -L 2>&1 | head -2
PY="$(command -v python3)"
if [ -d .devwheels ]; then "$PY" -m pip install -q --no-index --no-deps --target "$W/site" .devwheels/*.whl 2>&1 | tail -3; fi
export PYTHONPATH="$PWD/src:$W/site" PYTHONUNBUFFERED=1 KUBECONFIG=/nonexistent
case " $FG_CHECKS " in *" agent "*) AGENT_PROFILES="gke-a3-ultra:h200-rdma onprem-infiniband:h100-ib";; *) AGENT_PROFILES="";; esac
for p in $AGENT_PROFILES; do
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

case " $FG_CHECKS " in *" inspector "*) ;; *) exit 0;; esac
echo "== Inspector: build against the device's NCCL, run an NCCL canary, capture its records"
I="$OUT/inspector"; mkdir -p "$I" "$W/insp"
NCCLV="$("$PY" -c 'import torch; print(".".join(map(str, torch.cuda.nccl.version())))' 2>/dev/null)"
echo "torch NCCL: ${NCCLV:-none}"; echo "${NCCLV:-none}" > "$I/nccl-version"
SRC=""
for d in ".devnccl/$NCCLV/plugins/profiler/inspector" ".devnccl/$NCCLV/ext-profiler/inspector"; do
  [ -d "$d" ] && SRC="$d" && break
done
if [ -z "$SRC" ]; then
  echo "NO INSPECTOR SOURCE for NCCL $NCCLV in .devnccl/ (see the header of this script)" | tee "$I/NO_SOURCE"; exit 3
fi
cp -r "$SRC" "$W/insp/src"; sed -i 's/-march=native//' "$W/insp/src/Makefile"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
( cd "$W/insp/src" && timeout 300 make CUDA_HOME="$CUDA_HOME" ) > "$I/build.log" 2>&1; echo "build exit $?"
tail -3 "$I/build.log"
SO="$W/insp/src/libnccl-profiler-inspector.so"
if [ ! -f "$SO" ] && [ -f ".devnccl/$NCCLV/libnccl-profiler-inspector.so" ]; then
  # No compiler on the device: the copy built here from the same source (make in .devnccl/<v>/...; copy it up).
  echo "using the prebuilt .devnccl/$NCCLV/libnccl-profiler-inspector.so" | tee -a "$I/build.log"
  SO=".devnccl/$NCCLV/libnccl-profiler-inspector.so"
fi
[ -f "$SO" ] || { echo "THE PLUGIN DID NOT BUILD (see build.log)" | tee "$I/NO_PLUGIN"; exit 2; }
SO="$(cd "$(dirname "$SO")" && pwd)/$(basename "$SO")"
export NCCL_PROFILER_PLUGIN="$SO" NCCL_INSPECTOR_ENABLE=1 NCCL_INSPECTOR_DUMP_DIR="$I/records" \
  NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=1000000 NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES=1048576 \
  NCCL_INSPECTOR_DUMP_COLL_RING_SIZE=8 NCCL_INSPECTOR_ENABLE_P2P=0 NCCL_DEBUG_SUBSYS=INIT,ENV,NET
# Long enough for several dumps: the plugin writes only from its dump thread (no dump at teardown).
timeout 240 "$PY" -m fabricguard probe collective --local-ranks 1 --backend nccl -b 1M -e 1G -f 2 -w 5 -n 200 \
  -c all_reduce,all_gather,reduce_scatter -o "$I/nccl-logs" --format json > "$I/collective.json" 2> "$I/collective.stderr"
echo "probe exit $?"
unset NCCL_PROFILER_PLUGIN NCCL_INSPECTOR_ENABLE
ls -la "$I/records" 2>&1 | head; head -c 900 "$I"/records/*-pid*.log 2>/dev/null; echo
grep -h "PROFILER/Plugin" "$I"/nccl-logs/* 2>/dev/null | head -3
"$PY" -m fabricguard nccl inspect "$I/nccl-logs" --format json > "$I/nccl-inspect.json" 2>/dev/null
"$PY" - "$I" <<'PY'
import json, sys
from pathlib import Path
from fabricguard.nccl.inspector import parse_record, read_dir, summarize
d = Path(sys.argv[1])
lines = [ln for f in sorted((d / "records").glob("*-pid*.log")) for ln in f.read_bytes().splitlines()]
recs = [parse_record(ln) for ln in lines]
print("lines", len(lines), "parsed", sum(r is not None for r in recs),
      "versions", sorted({r.version for r in recs if r}), "nnodes", sorted({r.nnodes for r in recs if r}),
      "collectives", sorted({r.coll for r in recs if r}), "timing", sorted({str(r.timing) for r in recs if r}))
_kept, st = read_dir(d / "records")
print("follower:", st)
print("nccl inspect profiler_plugins:", json.loads((d / "nccl-inspect.json").read_text() or "{}").get("profiler_plugins"))
PY
tar -czf "$OUT/inspector.tar.gz" -C "$OUT" inspector; ls -la "$OUT/inspector.tar.gz"
