// silu_and_mul in CUDA (loaded by silu.py in a real bundle).
#include <cuda_runtime.h>

__global__ void silu_and_mul_kernel(const float* x, float* out, int d) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  /* one element */
    if (i < d) {
        float g = x[i];
        out[i] = g / (1.0f + expf(-g)) * x[i + d];
    }
}
