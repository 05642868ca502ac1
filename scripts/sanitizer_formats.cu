// One small program per compute-sanitizer report kind, so each tool's real wording can be captured
// (scripts/live_sanitizer_formats.sh) and checked against faultkit's debugger parser.
#include <cassert>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

// Two warps share one array with no barrier between the write and the read: each thread reads the word
// a thread of the other warp writes (RAW/WAR hazards between warps). `volatile` keeps both accesses.
// The first version (every thread wrote one __shared__ int and read it back, `race_folded` below) gave
// racecheck nothing on the H200 (2025.3.1, 0 hazards): nvcc 13.0's PTX of it has no shared load or store at
// all (the read is folded into the value written, then the store is dead: `out[i] = threadIdx.x`);
// `cuobjdump -sass` of both kernels (scripts/live_sanitizer_formats.sh, sass.txt) shows it in SASS.
__global__ void shared_race_kernel(int *out) {
    volatile __shared__ int slots[64];
    slots[threadIdx.x] = threadIdx.x;
    out[threadIdx.x] = slots[(threadIdx.x + 32) % 64];
}

__global__ void shared_race_folded_kernel(int *out) {
    __shared__ int slot;
    slot = threadIdx.x;
    out[threadIdx.x] = slot;
}

// The same race with the write in a noinline device function: racecheck's `access at` names the helper
// (`[clone race_helper_kernel(int *)] publish(volatile int *, int)` on the H200) and faultkit must not call it the kernel.
__device__ __noinline__ void publish(volatile int *slots, int i) { slots[i] = i; }
__global__ void race_helper_kernel(int *out) {
    volatile __shared__ int slots[64];
    publish(slots, threadIdx.x);
    out[threadIdx.x] = slots[(threadIdx.x + 32) % 64];
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

// The same store in a helper the compiler inlines: which function does memcheck's `at` line name, and does a
// `Device Frame:` line follow? (NVIDIA/Fuser#2930 shows an inlined-looking helper with no frame under it.)
__device__ __forceinline__ void store_inline_past_end(int *out, int i) { out[i + 4096] = i; }
__global__ void inline_helper_oob_kernel(int *out) { store_inline_past_end(out, threadIdx.x); }

static int run(const char *mode) {
    int *d_out = nullptr;
    float *d_in = nullptr, *d_f = nullptr;
    cudaMalloc(&d_out, 256 * sizeof(int));
    cudaMalloc(&d_in, 256 * sizeof(float));
    cudaMalloc(&d_f, 256 * sizeof(float));
    if (!strcmp(mode, "race")) shared_race_kernel<<<1, 64>>>(d_out);
    else if (!strcmp(mode, "uninit")) uninit_read_kernel<<<1, 64>>>(d_in, d_f);
    else if (!strcmp(mode, "barrier")) divergent_barrier_kernel<<<1, 64>>>(d_out);
    else if (!strcmp(mode, "misaligned")) misaligned_shared_kernel<<<1, 32>>>(d_out);
    else if (!strcmp(mode, "assert")) assert_kernel<<<2, 64>>>(40);
    else if (!strcmp(mode, "badpc")) bad_call_kernel<<<1, 32>>>(d_out, reinterpret_cast<device_fn>(0x1234));
    else if (!strcmp(mode, "leak")) { void *lost; cudaMalloc(&lost, 4096); }
    else if (!strcmp(mode, "helper")) helper_oob_kernel<<<1, 32>>>(d_out);
    else if (!strcmp(mode, "inline_helper")) inline_helper_oob_kernel<<<1, 32>>>(d_out);
    else if (!strcmp(mode, "race_folded")) shared_race_folded_kernel<<<1, 64>>>(d_out);
    else if (!strcmp(mode, "race_helper")) race_helper_kernel<<<1, 64>>>(d_out);
    cudaError_t err = cudaDeviceSynchronize();
    printf("%s: %s (%d)\n", mode, cudaGetErrorString(err), static_cast<int>(err));
    return err == cudaSuccess ? 0 : 1;
}

int main(int argc, char **argv) { return run(argc > 1 ? argv[1] : "race"); }
