// faultkit's poison amplifier: every block PyTorch's CUDA caching allocator takes back into its
// pool (the trace tracker's FREE_COMPLETED: the free was asked for and every stream that used the
// block is past it) is filled with a poison byte on the block's own stream, so a kernel that reads
// it later through a stale pointer or index reads poison (0x7F7F... as an index is far outside any
// pool: it faults) instead of the plausible old data a cached block keeps.
//
// Why this is safe for a correct program: a block in the pool holds nothing anyone may read (a new
// tensor from it is uninitialised), and the fill is ordered on the block's stream after every use the
// allocator knows of. Skipped while that stream captures a CUDA graph (the fill would join the graph)
// and for blocks smaller than the minimum asked. It is a separate library from the allocation tracker
// (tracker.cpp), built only when the amplifier is asked for, so a failure here never costs the black
// box its allocation map. Built by build.py; loaded with ctypes by runtime.py.

#include <c10/cuda/CUDACachingAllocator.h>

#include <atomic>
#include <cstdint>
#include <dlfcn.h>
#include <string>
#include <type_traits>

namespace {

typedef int (*memset_fn)(void*, int, size_t, void*);            // cudaMemsetAsync
typedef int (*capturing_fn)(void*, int*);                        // cudaStreamIsCapturing
typedef int (*get_device_fn)(int*);                              // cudaGetDevice / cudaSetDevice
typedef int (*set_device_fn)(int);

memset_fn g_memset = nullptr;
capturing_fn g_capturing = nullptr;
get_device_fn g_get_device = nullptr;
set_device_fn g_set_device = nullptr;
std::atomic<int> g_byte{-1};
uint64_t g_min_bytes = 0;
std::atomic<uint64_t> g_filled{0}, g_skipped{0}, g_failed{0}, g_bytes{0};
std::string g_error;

void* find(const char* name) {
  // torch loads the CUDA runtime among its global dependencies; else look for it by its sonames
  void* f = dlsym(RTLD_DEFAULT, name);
  if (f) return f;
  for (const char* so : {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"}) {
    void* h = dlopen(so, RTLD_LAZY | RTLD_NOLOAD);
    if (h && (f = dlsym(h, name))) return f;
  }
  return nullptr;
}

template <class S>
void* stream_ptr(const S& s) {
  if constexpr (std::is_pointer_v<S>) {
    return reinterpret_cast<void*>(s);
  } else if constexpr (std::is_integral_v<S>) {
    return reinterpret_cast<void*>(uintptr_t(s));
  } else {
    return nullptr;
  }
}

template <class TE>
void on_event(const TE& te) {
  int byte = g_byte.load(std::memory_order_relaxed);
  if (byte < 0 || te.action_ != TE::FREE_COMPLETED) return;
  if (uint64_t(te.size_) < g_min_bytes || te.size_ == 0) {
    g_skipped++;
    return;
  }
  void* stream = stream_ptr(te.stream_);
  int capturing = 0;
  if (g_capturing && g_capturing(stream, &capturing) == 0 && capturing != 0) {
    g_skipped++;
    return;
  }
  int cur = -1;
  bool switched = false;
  if (g_get_device && g_set_device && g_get_device(&cur) == 0 && cur != int(te.device_)) {
    switched = g_set_device(int(te.device_)) == 0;
  }
  int rc = g_memset(reinterpret_cast<void*>(uintptr_t(te.addr_)), byte, size_t(te.size_), stream);
  if (switched) g_set_device(cur);
  if (rc == 0) {
    g_filled++;
    g_bytes += uint64_t(te.size_);
  } else {
    g_failed++;
  }
}

}  // namespace

extern "C" {

const char* fk_poison_error() { return g_error.c_str(); }

// byte: the poison (0-255); min_bytes: smaller blocks are left alone. Returns 0 when attached.
int fk_poison_attach(int byte, uint64_t min_bytes) {
  g_memset = reinterpret_cast<memset_fn>(find("cudaMemsetAsync"));
  g_capturing = reinterpret_cast<capturing_fn>(find("cudaStreamIsCapturing"));
  g_get_device = reinterpret_cast<get_device_fn>(find("cudaGetDevice"));
  g_set_device = reinterpret_cast<set_device_fn>(find("cudaSetDevice"));
  if (!g_memset) {
    g_error = "cudaMemsetAsync not found in this process (no CUDA runtime loaded)";
    return -1;
  }
  g_min_bytes = min_bytes;
  try {
    c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker(
        [](const c10::cuda::CUDACachingAllocator::TraceEntry& te) { on_event(te); });
  } catch (const std::exception& e) {
    g_error = std::string("attachAllocatorTraceTracker: ") + e.what();
    return -2;
  } catch (...) {
    g_error = "attachAllocatorTraceTracker failed";
    return -2;
  }
  g_byte.store(byte & 0xFF);
  return 0;
}

// filled, skipped, failed, bytes filled: for the agent's header and the cost check.
void fk_poison_counts(uint64_t* out) {
  out[0] = g_filled.load();
  out[1] = g_skipped.load();
  out[2] = g_failed.load();
  out[3] = g_bytes.load();
}

void fk_poison_off() { g_byte.store(-1); }

}
