// faultkit's poison amplifier: every block PyTorch's CUDA caching allocator takes back into its
// pool (the trace tracker's FREE_COMPLETED: the free was asked for and every stream that used the
// block is past it) is filled with a poison byte on the block's own stream, so a kernel that reads
// it later through a stale pointer or index reads poison (0x7F7F... as an index is far outside any
// pool: it faults) instead of the plausible old data a cached block keeps.
//
// The byte is a tag: each fill takes the next byte of TAGS (from the one asked for), and the fill is
// recorded in the allocation tracker's ring (fk_note: the block, its size, stream and byte), so the
// black box can tell WHICH freed block a faulting address came from (analyze/poison_address.py).
// TAGS are the bytes with 2 to 7 bits set: for such a byte b every 8-bit rotation is in 0x03..0xFE,
// so the 64-bit word bbbb...b shifted left by any k (an index scaled by a power-of-two stride) has a
// top byte in 0x03..0xFE, and added to any base below 2^56 the address stays >= 2^57 (beyond every
// GPU's and CPU's virtual address range: 49 or 57 bits on NVIDIA, 48 on AMD, canonical x86-64) and
// below the top 0xFF.. range: it always faults, and it cannot be a real address. A byte outside
// TAGS (0x00, 0xFF, one bit set) is used for every fill as asked, and tells no block from another.
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
typedef void (*note_fn)(uint16_t, int16_t, uint64_t, uint64_t, uint64_t, uint64_t);   // tracker.cpp's fk_note
constexpr uint16_t KIND_POISON = 18;                                                    // ring.py's POISON

std::atomic<int> g_byte{-1};
note_fn g_note = nullptr;
uint8_t g_tags[256];
int g_ntags = 0;                       // 0: the one byte asked for, every fill
std::atomic<uint64_t> g_next{0};

int popcount8(int b) { return __builtin_popcount(unsigned(b) & 0xFFu); }

void make_tags(int first) {
  g_ntags = 0;
  if (popcount8(first) < 2 || popcount8(first) > 7) return;
  for (int i = 0; i < 256; i++) {
    int b = (first + i) & 0xFF;
    if (popcount8(b) >= 2 && popcount8(b) <= 7) g_tags[g_ntags++] = uint8_t(b);
  }
}
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
  if (g_ntags) byte = g_tags[g_next.fetch_add(1, std::memory_order_relaxed) % uint64_t(g_ntags)];
  int rc = g_memset(reinterpret_cast<void*>(uintptr_t(te.addr_)), byte, size_t(te.size_), stream);
  if (switched) g_set_device(cur);
  if (rc == 0) {
    g_filled++;
    g_bytes += uint64_t(te.size_);
    if (g_note) g_note(KIND_POISON, int16_t(te.device_), uint64_t(te.addr_), uint64_t(te.size_),
                       uint64_t(uintptr_t(stream)), uint64_t(byte));
  } else {
    g_failed++;
  }
}

}  // namespace

extern "C" {

const char* fk_poison_error() { return g_error.c_str(); }

// byte: the poison (0-255), the first tag; min_bytes: smaller blocks are left alone; note: the
// tracker's fk_note, or null (no fill records: the black box cannot say which block). 0 when attached.
int fk_poison_attach(int byte, uint64_t min_bytes, void* note) {
  g_memset = reinterpret_cast<memset_fn>(find("cudaMemsetAsync"));
  g_capturing = reinterpret_cast<capturing_fn>(find("cudaStreamIsCapturing"));
  g_get_device = reinterpret_cast<get_device_fn>(find("cudaGetDevice"));
  g_set_device = reinterpret_cast<set_device_fn>(find("cudaSetDevice"));
  if (!g_memset) {
    g_error = "cudaMemsetAsync not found in this process (no CUDA runtime loaded)";
    return -1;
  }
  g_min_bytes = min_bytes;
  g_note = reinterpret_cast<note_fn>(note);
  make_tags(byte & 0xFF);
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
