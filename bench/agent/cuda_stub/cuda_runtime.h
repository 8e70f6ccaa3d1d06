/* A CPU-only stand-in for the two CUDA runtime calls NCCL's Inspector plugin makes (cudaGetDevice,
 * cudaGetErrorString). Written for fabricguard; not NVIDIA's header. */
#ifndef FG_CUDA_RUNTIME_STUB_H
#define FG_CUDA_RUNTIME_STUB_H
typedef enum { cudaSuccess = 0, cudaErrorUnknown = 999 } cudaError_t;
#ifdef __cplusplus
extern "C" {
#endif
cudaError_t cudaGetDevice(int* device);
const char* cudaGetErrorString(cudaError_t error);
#ifdef __cplusplus
}
#endif
#endif
