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

// The few CPython functions used, declared weak: the library loads (and reports no sites) even in
// a process whose interpreter does not export them. No Python.h is needed to build it.
extern "C" {
typedef struct _object PyObject;
int PyGILState_Check(void) __attribute__((weak));
PyObject* PyEval_GetFrame(void) __attribute__((weak));               // borrowed
PyObject* PyFrame_GetBack(PyObject*) __attribute__((weak));          // new reference
PyObject* PyFrame_GetCode(PyObject*) __attribute__((weak));          // new reference
int PyFrame_GetLineNumber(PyObject*) __attribute__((weak));
PyObject* PyObject_GetAttrString(PyObject*, const char*) __attribute__((weak));
const char* PyUnicode_AsUTF8(PyObject*) __attribute__((weak));
void Py_IncRef(PyObject*) __attribute__((weak));
void Py_DecRef(PyObject*) __attribute__((weak));
void PyErr_Clear(void) __attribute__((weak));
int PyGC_Disable(void) __attribute__((weak));
int PyGC_Enable(void) __attribute__((weak));
}

namespace {

constexpr size_t HEADER_BYTES = 4096;
constexpr size_t RECORD_BYTES = 64;
constexpr size_t HEAD_AT = 24;
constexpr uint32_t SITE_NONE = 0, SITE_FULL = 0xFFFFFFFFu;
constexpr size_t MAX_SITES = 1 << 16;
constexpr int MAX_FRAMES = 32;
enum Kind : uint16_t { ALLOC = 1, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP,
                       SEGMENT_UNMAP, SNAPSHOT, OOM };

struct Ring {
  uint8_t* base = nullptr;
  size_t bytes = 0;
  uint64_t capacity = 0;
  bool all_blocks = false;
  int sites_fd = -1;
  std::string lib_prefix;
};

std::atomic<Ring*> g_ring{nullptr};
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

// ---- Python sites (only with the GIL held: the GIL also guards this table) ----
struct SiteKey {
  PyObject* inner;
  int inner_line;
  PyObject* user;
  int user_line;
  bool operator==(const SiteKey& o) const {
    return inner == o.inner && inner_line == o.inner_line && user == o.user && user_line == o.user_line;
  }
};
struct SiteHash {
  size_t operator()(const SiteKey& k) const {
    return std::hash<void*>()(k.inner) ^ (size_t(k.inner_line) * 0x9E3779B97F4A7C15ull) ^
           (std::hash<void*>()(k.user) << 1) ^ (size_t(k.user_line) << 17);
  }
};
std::unordered_map<SiteKey, uint32_t, SiteHash> g_sites;
std::unordered_map<PyObject*, bool> g_is_lib;   // code object -> under torch's folder (kept alive)

std::string attr_str(PyObject* code, const char* name) {
  PyObject* v = PyObject_GetAttrString(code, name);
  if (!v) {
    PyErr_Clear();
    return "?";
  }
  const char* s = PyUnicode_AsUTF8(v);
  std::string out = s ? s : "?";
  if (!s) PyErr_Clear();
  Py_DecRef(v);
  return out;
}

bool is_lib(PyObject* code, const std::string& prefix) {
  auto it = g_is_lib.find(code);
  if (it != g_is_lib.end()) return it->second;
  std::string file = attr_str(code, "co_filename");
  bool lib = file.compare(0, prefix.size(), prefix) == 0 || file.rfind("<frozen", 0) == 0;
  Py_IncRef(code);   // held: its address is never reused for another code object
  g_is_lib.emplace(code, lib);
  return lib;
}

std::string describe(PyObject* code, int line) {
  return attr_str(code, "co_filename") + ":" + std::to_string(line) + " " + attr_str(code, "co_name");
}

uint32_t python_site(Ring* r) {
  if (!PyGILState_Check || !PyEval_GetFrame || !PyFrame_GetBack || !PyFrame_GetCode || !PyObject_GetAttrString ||
      !PyUnicode_AsUTF8 || !Py_IncRef || !Py_DecRef || !PyErr_Clear || !PyFrame_GetLineNumber)
    return SITE_NONE;
  if (!PyGILState_Check()) return SITE_NONE;   // a thread outside Python (or without the GIL)
  PyObject* frame = PyEval_GetFrame();
  if (!frame) return SITE_NONE;
  // Frame objects may be made below (3.11+): no collection may run while the allocator is locked.
  int gc_was = PyGC_Disable ? PyGC_Disable() : 0;
  Py_IncRef(frame);
  PyObject* inner = nullptr;
  int inner_line = 0;
  PyObject* user = nullptr;
  int user_line = 0;
  for (int depth = 0; frame && depth < MAX_FRAMES; depth++) {
    PyObject* code = PyFrame_GetCode(frame);
    int line = PyFrame_GetLineNumber(frame);
    if (!inner) {
      inner = code;
      inner_line = line;
      Py_IncRef(inner);
    }
    bool lib = is_lib(code, r->lib_prefix);
    if (!lib) {
      user = code;
      user_line = line;
      Py_IncRef(user);
    }
    Py_DecRef(code);
    if (!lib) break;
    PyObject* back = PyFrame_GetBack(frame);
    Py_DecRef(frame);
    frame = back;
  }
  if (frame) Py_DecRef(frame);
  if (gc_was && PyGC_Enable) PyGC_Enable();
  if (!inner) return SITE_NONE;
  SiteKey key{inner, inner_line, user, user_line};
  auto it = g_sites.find(key);
  uint32_t id;
  if (it != g_sites.end()) {
    id = it->second;
    Py_DecRef(inner);            // the table already holds these
    if (user) Py_DecRef(user);
  } else if (g_sites.size() >= MAX_SITES) {
    Py_DecRef(inner);
    if (user) Py_DecRef(user);
    return SITE_FULL;
  } else {
    id = uint32_t(g_sites.size() + 1);
    g_sites.emplace(key, id);    // keeps the references taken above
    if (r->sites_fd >= 0) {
      std::string line = std::to_string(id) + "\t" + (user ? describe(user, user_line) : std::string("-")) + "\t" +
                         describe(inner, inner_line) + "\n";
      ssize_t ignored = write(r->sites_fd, line.data(), line.size());   // one write: a whole line or its cut end
      (void)ignored;
    }
  }
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

void put(Ring* r, uint16_t kind, int16_t device, uint64_t addr, uint64_t size, uint64_t stream, uint32_t site) {
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
  uint32_t crc = crc_update(crc_update(0, rec, 8), rec + 12, RECORD_BYTES - 12);
  std::memcpy(rec + 8, &crc, 4);
  std::memcpy(r->base + HEADER_BYTES + ((seq - 1) % r->capacity) * RECORD_BYTES, rec, RECORD_BYTES);
}

template <class TE>
void on_event(const TE& te) {
  Ring* r = g_ring.load(std::memory_order_acquire);
  if (!r) return;
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
  if (!segment && !r->all_blocks) return;
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
int fk_attach(const char* ring_path, const char* sites_path, uint64_t capacity, int all_blocks,
              const char* lib_prefix) {
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
  r->lib_prefix = lib_prefix ? lib_prefix : "";
  r->sites_fd = open(sites_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
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

// In a forked child: the parent's CUDA context is unusable there; stop writing the parent's ring.
void fk_forget() { g_ring.store(nullptr); }

}
