/* A CPU-only stand-in for the few CUDA driver API declarations NCCL's Inspector plugin uses (cuDeviceGet,
 * cuDeviceGetUuid, cuGetErrorString), so that its real code can be built and driven without a GPU
 * (tests/fixtures/inspector/run_plugin.sh). Written for fabricguard; not NVIDIA's header. */
#ifndef FG_CUDA_STUB_H
#define FG_CUDA_STUB_H
typedef enum { CUDA_SUCCESS = 0, CUDA_ERROR_UNKNOWN = 999 } CUresult;
typedef int CUdevice;
typedef struct { char bytes[16]; } CUuuid;
#ifdef __cplusplus
extern "C" {
#endif
CUresult cuGetErrorString(CUresult error, const char** pStr);
CUresult cuDeviceGet(CUdevice* device, int ordinal);
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev);
#ifdef __cplusplus
}
#endif
#endif
