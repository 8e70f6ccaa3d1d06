/* The stand-in libcudart.so and libcuda.so for driving NCCL's Inspector plugin without a GPU: device 0, whose
 * UUID is FG_STUB_GPU_UUID's 16 bytes (default GPU-00000000-...-0001). Built by run_plugin.sh. */
#include <stdlib.h>
#include <string.h>
#include "cuda.h"
#include "cuda_runtime.h"

cudaError_t cudaGetDevice(int* device) { *device = 0; return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t error) { return error == cudaSuccess ? "no error" : "stub error"; }
CUresult cuGetErrorString(CUresult error, const char** pStr) { *pStr = error ? "stub error" : "no error"; return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice* device, int ordinal) { *device = ordinal; return CUDA_SUCCESS; }
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  memset(uuid->bytes, 0, sizeof uuid->bytes);
  uuid->bytes[15] = (char)(dev + 1);
  return CUDA_SUCCESS;
}
