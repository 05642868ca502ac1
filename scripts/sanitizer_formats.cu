// One small program per compute-sanitizer report kind, so each tool's real wording can be captured
// (scripts/live_sanitizer_formats.sh) and checked against faultkit's debugger parser.
#include <cassert>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

__global__ void shared_race_kernel(int *out) {
    __shared__ int slot;
    slot = threadIdx.x;              // every thread writes the same word, no barrier: WAW and RAW
    out[threadIdx.x] = slot;
}

__global__ void uninit_read_kernel(const float *in, float *out) {
    out[threadIdx.x] = in[threadIdx.x] * 2.0f;   // `in` was allocated and never written
}

__global__ void divergent_barrier_kernel(int *out) {
    if (threadIdx.x < 48) {          // two warps of 64 threads: only some threads reach the barrier
        __syncthreads();
    }
    out[threadIdx.x] = threadIdx.x;
}

__global__ void misaligned_shared_kernel(int *out) {
    __shared__ char bytes[64];
    int *p = reinterpret_cast<int *>(bytes + 1 + 4 * (threadIdx.x % 8));
    *p = threadIdx.x;                // a 4-byte store at an odd address
    out[threadIdx.x] = *p;
}

__global__ void assert_kernel(int n) { assert(threadIdx.x < n); }

typedef void (*device_fn)(int *);
__global__ void bad_call_kernel(int *out, device_fn f) { f(out); }   // a call through a wild pointer

// A device function the kernel calls (not inlined: memcheck prints its `Device Frame:` line under the
// access and the kernel's frame outermost; faultkit must name the kernel, not the helper)
__device__ __noinline__ void store_past_end(int *out, int i) { out[i + 4096] = i; }
__global__ void helper_oob_kernel(int *out) { store_past_end(out, threadIdx.x); }

static int run(const char *mode) {
    int *d_out = nullptr;
    float *d_in = nullptr, *d_f = nullptr;
    cudaMalloc(&d_out, 256 * sizeof(int));
    cudaMalloc(&d_in, 256 * sizeof(float));
    cudaMalloc(&d_f, 256 * sizeof(float));
    if (!strcmp(mode, "race")) shared_race_kernel<<<2, 64>>>(d_out);
    else if (!strcmp(mode, "uninit")) uninit_read_kernel<<<1, 64>>>(d_in, d_f);
    else if (!strcmp(mode, "barrier")) divergent_barrier_kernel<<<1, 64>>>(d_out);
    else if (!strcmp(mode, "misaligned")) misaligned_shared_kernel<<<1, 32>>>(d_out);
    else if (!strcmp(mode, "assert")) assert_kernel<<<2, 64>>>(40);
    else if (!strcmp(mode, "badpc")) bad_call_kernel<<<1, 32>>>(d_out, reinterpret_cast<device_fn>(0x1234));
    else if (!strcmp(mode, "leak")) { void *lost; cudaMalloc(&lost, 4096); }
    else if (!strcmp(mode, "helper")) helper_oob_kernel<<<1, 32>>>(d_out);
    cudaError_t err = cudaDeviceSynchronize();
    printf("%s: %s (%d)\n", mode, cudaGetErrorString(err), static_cast<int>(err));
    return err == cudaSuccess ? 0 : 1;
}

int main(int argc, char **argv) { return run(argc > 1 ? argv[1] : "race"); }
