// faultkit's allocator tracker: PyTorch's CUDA caching allocator calls it for every event it
// records (attachAllocatorTraceTracker: C++ only, called under the allocator's lock, also when
// the memory history is off), and it stores each event as one fixed-size record into the agent's
// MAP_SHARED ring file (format: ring.py). No lock, no system call per event: a slot is claimed by
// an atomic add; the record's CRC-32 makes a torn last record detectable.
//
// The Python site of an event (the first frame outside torch's own folder, and the innermost
// frame) is read through the CPython API when the allocating thread holds the GIL, and interned:
// each new site is appended once to the sites file (a single write() of a whole line).
// Built by build.py against the installed torch; loaded with ctypes by runtime.py.

#include <c10/cuda/CUDACachingAllocator.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <type_traits>
#include <unistd.h>
#include <unordered_map>
#include <vector>

// Python sites. Torch's op bindings release the GIL before they allocate, so the allocating thread
// usually does not hold it and no CPython API may be called here. The thread's own frame chain
// cannot change while it is inside this callback, so it is read raw (code object and instruction
// pointers only: no reference count, no allocation), with offsets found by fk_calibrate() from a
// frame whose code is known; if calibration fails there are no sites (and the header says so).
// New stacks are queued; the agent's resolver thread (with the GIL) turns code pointers into
// file:line function and writes the sites file. One CPython function is declared, weak.
extern "C" {
typedef struct _object PyObject;
void* PyGILState_GetThisThreadState(void) __attribute__((weak));
}

namespace {

constexpr size_t HEADER_BYTES = 4096;
constexpr size_t RECORD_BYTES = 64;
constexpr size_t HEAD_AT = 24;
constexpr uint32_t SITE_NONE = 0, SITE_FULL = 0xFFFFFFFFu;

constexpr int MAX_FRAMES = 32;
enum Kind : uint16_t { ALLOC = 1, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP,
                       SEGMENT_UNMAP, SNAPSHOT, OOM };

struct Ring {
  uint8_t* base = nullptr;
  size_t bytes = 0;
  uint64_t capacity = 0;
  bool all_blocks = false;
};

std::atomic<Ring*> g_ring{nullptr};
std::atomic<int> g_mode{-1};    // -1: as attached; 0 off, 1 segments, 2 blocks (fk_set_mode: for measuring)
std::string g_error;
uint32_t crc_table[256];

void crc_init() {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    crc_table[i] = c;
  }
}

uint32_t crc_update(uint32_t crc, const uint8_t* p, size_t n) {  // zlib's crc32, chained
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// ---- Python sites ----
constexpr int DEPTH = 8;
struct Layout {
  bool ok = false;
  bool via_cframe = false;   // 3.11/3.12: tstate->cframe->current_frame; 3.13: tstate->current_frame
  size_t cframe_off = 0;
  size_t tstate_off = 0, code_off = 0, prev_off = 0, instr_off = 0, code_base = 0;
} g_layout;

struct RawStack {
  uint64_t code[DEPTH];
  uint64_t off[DEPTH];
  int n;
};
struct StackHash {
  size_t operator()(const RawStack& s) const {
    size_t h = size_t(s.n);
    for (int i = 0; i < s.n; i++) h = h * 1000003u ^ size_t(s.code[i]) ^ (size_t(s.off[i]) << 20);
    return h;
  }
};
struct StackEq {
  bool operator()(const RawStack& a, const RawStack& b) const {
    if (a.n != b.n) return false;
    for (int i = 0; i < a.n; i++)
      if (a.code[i] != b.code[i] || a.off[i] != b.off[i]) return false;
    return true;
  }
};
std::mutex g_sites_mu;
std::unordered_map<RawStack, uint32_t, StackHash, StackEq> g_sites;
std::vector<std::pair<uint32_t, RawStack>> g_pending;
std::atomic<uint32_t> g_pending_n{0};
std::condition_variable g_pending_cv;   // the resolver waits on it with the GIL released: no polling
constexpr size_t MAX_SITES = 1 << 16;

inline uint64_t rd(uint64_t a) { return *reinterpret_cast<const uint64_t*>(a); }

// Reads that may hit unmapped memory (calibration, checking a code pointer): write() reports EFAULT
// instead of faulting.
bool safe_read(uint64_t addr, void* out, size_t n) {
  static int fds[2] = {-1, -1};
  if (fds[0] < 0 && pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  if (addr < 4096) return false;
  if (write(fds[1], reinterpret_cast<const void*>(addr), n) != ssize_t(n)) return false;
  return read(fds[0], out, n) == ssize_t(n);
}
bool safe_word(uint64_t addr, uint64_t* out) { return safe_read(addr, out, 8); }

bool raw_stack(RawStack* st) {
  const Layout& L = g_layout;
  if (!L.ok || !PyGILState_GetThisThreadState) return false;
  uint64_t ts = uint64_t(PyGILState_GetThisThreadState());
  if (!ts) return false;                        // a thread outside Python
  uint64_t f = rd(ts + L.tstate_off);
  if (f && L.via_cframe) f = rd(f + L.cframe_off);
  st->n = 0;
  while (f && st->n < DEPTH) {
    uint64_t code = rd(f + L.code_off);
    uint64_t ip = rd(f + L.instr_off);
    st->code[st->n] = code;
    st->off[st->n] = ip >= code + L.code_base ? ip - code - L.code_base : 0;
    st->n++;
    f = rd(f + L.prev_off);
  }
  return st->n > 0;
}

uint32_t python_site(Ring*) {
  RawStack st;
  std::memset(&st, 0, sizeof st);
  if (!raw_stack(&st)) return SITE_NONE;
  std::lock_guard<std::mutex> g(g_sites_mu);
  auto it = g_sites.find(st);
  if (it != g_sites.end()) return it->second;
  if (g_sites.size() >= MAX_SITES) return SITE_FULL;
  uint32_t id = uint32_t(g_sites.size() + 1);
  g_sites.emplace(st, id);
  g_pending.emplace_back(id, st);
  g_pending_n.store(uint32_t(g_pending.size()), std::memory_order_release);
  g_pending_cv.notify_one();
  return id;
}

template <class S>
uint64_t stream_id(const S& s) {
  if constexpr (std::is_pointer_v<S>) {
    return uint64_t(reinterpret_cast<uintptr_t>(s));
  } else if constexpr (std::is_integral_v<S>) {
    return uint64_t(s);
  } else {
    return 0;
  }
}

void put(Ring* r, uint16_t kind, int16_t device, uint64_t addr, uint64_t size, uint64_t stream, uint32_t site,
         uint64_t extra = 0) {
  uint64_t seq = __atomic_add_fetch(reinterpret_cast<uint64_t*>(r->base + HEAD_AT), 1, __ATOMIC_RELAXED);
  uint8_t rec[RECORD_BYTES];
  std::memset(rec, 0, sizeof rec);
  uint64_t t = now_ns();
  uint32_t tid = uint32_t(syscall(SYS_gettid));
  std::memcpy(rec + 0, &seq, 8);
  std::memcpy(rec + 12, &kind, 2);
  std::memcpy(rec + 14, &device, 2);
  std::memcpy(rec + 16, &t, 8);
  std::memcpy(rec + 24, &addr, 8);
  std::memcpy(rec + 32, &size, 8);
  std::memcpy(rec + 40, &stream, 8);
  std::memcpy(rec + 48, &site, 4);
  std::memcpy(rec + 52, &tid, 4);
  std::memcpy(rec + 56, &extra, 8);
  uint32_t crc = crc_update(crc_update(0, rec, 8), rec + 12, RECORD_BYTES - 12);
  std::memcpy(rec + 8, &crc, 4);
  std::memcpy(r->base + HEADER_BYTES + ((seq - 1) % r->capacity) * RECORD_BYTES, rec, RECORD_BYTES);
}

template <class TE>
void on_event(const TE& te) {
  Ring* r = g_ring.load(std::memory_order_acquire);
  if (!r) return;
  int mode = g_mode.load(std::memory_order_relaxed);
  if (mode == 0) return;
  uint16_t kind;
  switch (te.action_) {
    case TE::ALLOC: kind = ALLOC; break;
    case TE::FREE_REQUESTED: kind = FREE_REQUESTED; break;
    case TE::FREE_COMPLETED: kind = FREE_COMPLETED; break;
    case TE::SEGMENT_ALLOC: kind = SEGMENT_ALLOC; break;
    case TE::SEGMENT_FREE: kind = SEGMENT_FREE; break;
    case TE::SEGMENT_MAP: kind = SEGMENT_MAP; break;
    case TE::SEGMENT_UNMAP: kind = SEGMENT_UNMAP; break;
    case TE::OOM: kind = OOM; break;
    default: return;
  }
  bool segment = kind >= SEGMENT_ALLOC;
  if (!segment && (mode == 1 || (mode < 0 && !r->all_blocks))) return;
  // A free's site says who freed; FREE_COMPLETED may run on another thread, later: no site.
  uint32_t site = (kind == ALLOC || kind == SEGMENT_ALLOC || kind == SEGMENT_MAP || kind == FREE_REQUESTED ||
                   kind == SEGMENT_FREE || kind == SEGMENT_UNMAP || kind == OOM)
                      ? python_site(r)
                      : SITE_NONE;
  put(r, kind, int16_t(te.device_), uint64_t(te.addr_), uint64_t(te.size_), stream_id(te.stream_), site);
}

}  // namespace

extern "C" {

const char* fk_error() { return g_error.c_str(); }

// ring: a file ring.py created (header written, allocated in full); sites: appended to.
int fk_attach(const char* ring_path, uint64_t capacity, int all_blocks) {
  static std::once_flag once;
  std::call_once(once, crc_init);
  if (g_ring.load()) {
    g_error = "already attached";
    return -1;
  }
  int fd = open(ring_path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    g_error = std::string("open ") + ring_path + ": " + strerror(errno);
    return -2;
  }
  size_t bytes = HEADER_BYTES + capacity * RECORD_BYTES;
  struct stat st;
  if (fstat(fd, &st) != 0 || size_t(st.st_size) < bytes) {
    close(fd);
    g_error = "the ring file is shorter than its capacity";
    return -3;
  }
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    g_error = std::string("mmap: ") + strerror(errno);
    return -4;
  }
  auto* r = new Ring();
  r->base = static_cast<uint8_t*>(m);
  r->bytes = bytes;
  r->capacity = capacity;
  r->all_blocks = all_blocks != 0;
  g_ring.store(r, std::memory_order_release);
  try {
    c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker(
        [](const c10::cuda::CUDACachingAllocator::TraceEntry& te) { on_event(te); });
  } catch (const std::exception& e) {
    g_ring.store(nullptr);
    g_error = std::string("attachAllocatorTraceTracker: ") + e.what();
    return -5;
  } catch (...) {
    g_ring.store(nullptr);
    g_error = "attachAllocatorTraceTracker failed";
    return -5;
  }
  return 0;
}

// Called with the GIL held from a Python frame running `inner` (called from a frame running
// `outer`), whose instructions start `code_base` bytes into the code object and are `code_len`
// bytes long: finds where this interpreter keeps the thread's current frame, a frame's code, its
// caller and its instruction pointer. Returns 0 when found.
int fk_calibrate(PyObject* inner, PyObject* outer, uint64_t code_base, uint64_t code_len) {
  if (!PyGILState_GetThisThreadState) {
    g_error = "PyGILState_GetThisThreadState is not exported by this interpreter";
    return -1;
  }
  uint64_t ts = uint64_t(PyGILState_GetThisThreadState());
  uint64_t ci = uint64_t(inner), co = uint64_t(outer);
  const size_t code_offs[] = {0, 32, 8, 16, 24};
  for (size_t x = 0; x < 512; x += 8) {
    uint64_t v;
    if (!safe_word(ts + x, &v) || !v) continue;
    // chain 0: tstate->current_frame (3.13); 1, 2: tstate->cframe->current_frame at 0 (3.12) or 8 (3.11)
    for (int chain = 0; chain < 3; chain++) {
      uint64_t f = v;
      if (chain > 0 && !safe_word(v + (chain == 2 ? 8 : 0), &f)) continue;
      if (!f) continue;
      for (size_t cf : code_offs) {
        uint64_t c;
        if (!safe_word(f + cf, &c) || c != ci) continue;
        for (size_t y = 8; y < 128; y += 8) {
          uint64_t p, pc;
          if (!safe_word(f + y, &p) || !p || !safe_word(p + cf, &pc) || pc != co) continue;
          for (size_t z = 8; z < 128; z += 8) {
            uint64_t ip;
            if (z == y || z == cf || !safe_word(f + z, &ip)) continue;
            if (ip >= ci + code_base && ip < ci + code_base + code_len) {
              g_layout.tstate_off = x;
              g_layout.via_cframe = chain > 0;
              g_layout.cframe_off = chain == 2 ? 8 : 0;
              g_layout.code_off = cf;
              g_layout.prev_off = y;
              g_layout.instr_off = z;
              g_layout.code_base = code_base;
              g_layout.ok = true;
              return 0;
            }
          }
        }
      }
    }
  }
  g_error = "the interpreter's frame layout was not recognised: no Python sites";
  return -2;
}

uint32_t fk_pending() { return g_pending_n.load(std::memory_order_acquire); }

// Blocks (call it without the GIL: ctypes.CDLL) until a new stack is queued or timeout_ms passes.
uint32_t fk_wait(int timeout_ms) {
  std::unique_lock<std::mutex> g(g_sites_mu);
  g_pending_cv.wait_for(g, std::chrono::milliseconds(timeout_ms), [] { return !g_pending.empty(); });
  return uint32_t(g_pending.size());
}

// Moves up to `max` queued new stacks into out: per stack id, depth, then depth (code, offset) pairs.
int fk_take(uint64_t* out, int max) {
  std::lock_guard<std::mutex> g(g_sites_mu);
  int n = 0;
  size_t i = 0;
  for (; i < g_pending.size() && n < max; i++, n++) {
    const auto& e = g_pending[i];
    uint64_t* row = out + size_t(n) * (2 + 2 * DEPTH);
    row[0] = e.first;
    row[1] = uint64_t(e.second.n);
    for (int k = 0; k < DEPTH; k++) {
      row[2 + 2 * k] = e.second.code[k];
      row[3 + 2 * k] = e.second.off[k];
    }
  }
  g_pending.erase(g_pending.begin(), g_pending.begin() + long(i));
  g_pending_n.store(uint32_t(g_pending.size()), std::memory_order_release);
  return n;
}

// Is this still a live object of that type (a code pointer queued a moment ago)?
int fk_is_object_of(uint64_t addr, uint64_t type) {
  uint64_t head[2];
  if (!safe_read(addr, head, sizeof head)) return 0;
  return head[1] == type && head[0] > 0 && head[0] < (1ull << 48) ? 1 : 0;
}

// The cost benchmark switches what is recorded within one process (scripts/bench_agent.py).
void fk_set_mode(int mode) { g_mode.store(mode); }

// Another agent library's record into this ring (poison.cpp's fills: kind, the block, `extra` its
// poison byte), so that one writer and one file keep every allocator fact in order. No site: the
// caller runs inside the allocator's callback. Its address is handed to that library by runtime.py.
void fk_note(uint16_t kind, int16_t device, uint64_t addr, uint64_t size, uint64_t stream, uint64_t extra) {
  Ring* r = g_ring.load(std::memory_order_acquire);
  if (r) put(r, kind, device, addr, size, stream, SITE_NONE, extra);
}

// The same with a site the caller named (runtime.py's record of torch's uncached allocations, whose
// Python sites it reads itself: it runs in Python, with the GIL).
void fk_note_site(uint16_t kind, int16_t device, uint64_t addr, uint64_t size, uint64_t stream, uint32_t site) {
  Ring* r = g_ring.load(std::memory_order_acquire);
  if (r) put(r, kind, device, addr, size, stream, site, 0);
}

// In a forked child: the parent's CUDA context is unusable there; stop writing the parent's ring.
void fk_forget() { g_ring.store(nullptr); }

}
