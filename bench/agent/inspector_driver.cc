// Drive NCCL's Inspector profiler plugin through its own profiler API (v5), the calls NCCL makes for each
// collective, so that the plugin's real JSON writer produces its real output without a GPU or NCCL itself.
//
//   (compiled against the Inspector plugin headers of the NCCL tree being checked; see bench/agent/h200_agent_check.sh)
//   NCCL_INSPECTOR_ENABLE=1 NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=200000 NCCL_INSPECTOR_DUMP_DIR=out
//     unshare -u sh -c 'hostname llm-sft-workers-0-0; ./inspector_driver ./libnccl-profiler-inspector.so 0 4 2 355'
//
// Arguments: plugin, rank, nranks, nnodes, target busbw (GB/s) of the inter-node communicator. The process opens
// two communicators as a data-parallel job would: "DP" spanning nnodes, "TP" within the node (nnodes 1). For each
// collective it starts the collective event, one kernel-channel event per channel with GPU-globaltimer stamps
// (pTimer, nanoseconds) whose difference is the execution time that gives the target busbw, records the
// KernelChStop state and stops the events, then waits one dump interval (2.28/2.29 dump the latest collective
// per communicator; 2.30 drains a ring). The headers are the plugin's own (nccl/ in its source directory).
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "profiler.h"

static void logfn(ncclDebugLogLevel, unsigned long, const char*, int, const char* fmt, ...) {}

static uint64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

struct Coll {
  const char* func;
  size_t count;  // elements of ncclFloat32 per rank, as NCCL reports count
  double factor;
  double traffic_ranks;  // AllGather/ReduceScatter: traffic = size x nranks
};

static void run(ncclProfiler_v5_t* p, void* ctx, int rank, int nranks, const Coll& c, uint64_t sn, double busbw) {
  ncclProfilerEventDescr_v5_t d;
  memset(&d, 0, sizeof d);
  d.type = ncclProfileColl;
  d.rank = rank;
  d.coll.seqNumber = sn;
  d.coll.func = c.func;
  d.coll.count = c.count;
  d.coll.datatype = "ncclFloat32";
  d.coll.nChannels = 2;
  d.coll.algo = "RING";
  d.coll.proto = "SIMPLE";
  void* coll = nullptr;
  p->startEvent(ctx, &coll, &d);
  double bytes = (double)c.count * 4 * (c.traffic_ranks ? nranks : 1);
  double algbw = busbw / c.factor;
  uint64_t exec_ns = (uint64_t)(bytes / (algbw * 1e9) * 1e9);
  uint64_t t0 = now_ns();
  void* ch[2] = {nullptr, nullptr};
  for (int i = 0; i < 2; i++) {
    ncclProfilerEventDescr_v5_t k;
    memset(&k, 0, sizeof k);
    k.type = ncclProfileKernelCh;
    k.parentObj = coll;
    k.rank = rank;
    k.kernelCh.channelId = (uint8_t)i;
    k.kernelCh.pTimer = t0;
    p->startEvent(ctx, &ch[i], &k);
  }
  for (int i = 0; i < 2; i++) {
    ncclProfilerEventStateArgs_v5_t a;
    memset(&a, 0, sizeof a);
    a.kernelCh.pTimer = t0 + exec_ns;
    p->recordEventState(ch[i], ncclProfilerKernelChStop, &a);
  }
  for (int i = 0; i < 2; i++) p->stopEvent(ch[i]);
  p->stopEvent(coll);
}

int main(int argc, char** argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: %s PLUGIN RANK NRANKS NNODES BUSBW [STEPS]\n", argv[0]);
    return 3;
  }
  int rank = atoi(argv[2]), nranks = atoi(argv[3]), nnodes = atoi(argv[4]);
  double busbw = atof(argv[5]);
  int steps = argc > 6 ? atoi(argv[6]) : 3;
  const char* interval = getenv("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS");
  useconds_t wait = (useconds_t)((interval ? atol(interval) : 200000) * 2);
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 2;
  }
  ncclProfiler_v5_t* p = (ncclProfiler_v5_t*)dlsym(h, "ncclProfiler_v5");
  if (!p) {
    fprintf(stderr, "no ncclProfiler_v5 in %s\n", argv[1]);
    return 2;
  }
  int gpus = nranks / nnodes;
  void *dp = nullptr, *tp = nullptr;
  int mask = 0;
  if (p->init(&dp, 0x7f3c9e4a1b2c3dull, &mask, "DP", nnodes, nranks, rank, logfn) != ncclSuccess) return 2;
  if (gpus > 1 && p->init(&tp, 0x5d1e0a7b9c4f21ull, &mask, "TP", 1, gpus, rank % gpus, logfn) != ncclSuccess) return 2;
  const double n = nranks;
  const Coll world[] = {
      {"AllReduce", (256u << 20) / 4, 2 * (n - 1) / n, 0},
      {"AllGather", (32u << 20) / 4, (n - 1) / n, 1},
      {"ReduceScatter", (32u << 20) / 4, (n - 1) / n, 1},
      {"AllReduce", 65536 / 4, 2 * (n - 1) / n, 0},
  };
  uint64_t sn = 0;
  for (int s = 0; s < steps; s++) {
    for (const Coll& c : world) {
      ++sn;
      run(p, dp, rank, nranks, c, sn, c.count * 4 < (1u << 20) ? 9.5 : busbw);
      if (tp) {
        const Coll intra = {"AllReduce", (128u << 20) / 4, 2.0 * (gpus - 1) / gpus, 0};
        run(p, tp, rank % gpus, gpus, intra, sn, 420.0);
      }
      usleep(wait);  // one dump sees this collective (2.28/2.29 keep only the latest per communicator)
    }
  }
  p->finalize(dp);
  if (tp) p->finalize(tp);
  return 0;
}
