// A stand-in for PyTorch's c10/cuda/CUDACachingAllocator.h with only what faultkit's tracker uses
// (the names and fields as PyTorch 2.11 has them), so the tracker builds and runs on a CPU machine:
// fake_event() plays the allocator calling the attached tracker.
#include <cstddef>
#include <functional>
#include <vector>
typedef struct CUstream_st* cudaStream_t;
namespace c10 {
using DeviceIndex = signed char;
namespace cuda::CUDACachingAllocator {
struct TraceEntry {
  enum Action { ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP,
                SNAPSHOT, OOM, USER_DEFINED };
  Action action_;
  DeviceIndex device_;
  size_t addr_;
  cudaStream_t stream_{};
  size_t size_;
};
using AllocatorTraceTracker = std::function<void(const TraceEntry&)>;
// torch keeps every attached tracker and calls each (the agent attaches two: tracker.cpp, poison.cpp)
inline std::vector<AllocatorTraceTracker>& fake_trackers() {
  static std::vector<AllocatorTraceTracker> t;
  return t;
}
inline void attachAllocatorTraceTracker(AllocatorTraceTracker t) { fake_trackers().push_back(std::move(t)); }
}  // namespace cuda::CUDACachingAllocator
}  // namespace c10
extern "C" void fake_event(int action, size_t addr, size_t size, size_t stream) {
  using namespace c10::cuda::CUDACachingAllocator;
  TraceEntry te{TraceEntry::Action(action), 0, addr, reinterpret_cast<cudaStream_t>(stream), size};
  for (auto& t : fake_trackers()) t(te);
}
