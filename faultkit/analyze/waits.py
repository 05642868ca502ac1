"""What each thread of a live process waits on, from its stack: the GPU, a collective, or the host.

The rules are the one table of symbols and Python functions that mean a wait. A thread is judged
by the most telling frame of its stack, not the innermost one: a `queue.get` ends in a lock and a
futex, a `barrier()` in a device synchronize, a GPU wait in an ioctl or a poll.
  1. a collective frame anywhere (an NCCL/RCCL/gloo call, a c10d Work wait, a store get) wins;
  2. else a GPU wait frame anywhere (ROCr signal waits, *Synchronize, `.item()`, stream/event queries);
  3. else the host wait of the highest rank among the frames below the thread's own code (the
     innermost Python frame that is neither the standard library nor a known wait): a queue or a
     socket beats the condition variable and the lock it is built on.
A thread that matches nothing is `running` where the tool or /proc says it is on a CPU.

Before any of that, a thread (or a whole process) that is one of the helpers real servers carry
(multiprocessing's resource and semaphore trackers, queue feeder threads, pool handler threads,
tokenizers' rayon pool, OpenMP pools, gRPC's and ZMQ's and Ray's internal threads, watchdog and
monitor threads) is `background`: it waits like that for its whole life and is never a hang.

Each host wait is also one of two sources of wake-up: from OUTSIDE the tree (a socket, a message
queue, an event loop, a timer: a request may come at any time) or from INSIDE it (a queue, a pipe
read, a condition, a parked pool thread, a child or thread waited for: only another thread of the
tree can end it). analyze/hang.py calls a tree where every wait is an inside one, and someone waits
on another, hung: what they wait for never comes.
"""

from __future__ import annotations

from .. import lazy_re as re   # compiled at first use: start-up (issue #35)
from dataclasses import dataclass

from ..hang_model import StackFrame, ThreadStack
from .hidden_call import kind_of_line

GPU, COLLECTIVE, HOST, RUNNING, UNKNOWN = "gpu", "collective", "host", "running", "unknown"
# Host waits of a process that waits for work: with nothing else going on, the process is idle.
# `read` is a pipe or socket read (a resource tracker's, a worker's of its parent's pipe), `park` a
# pool thread asleep in a futex until it is given work, `join` a thread waiting for another thread.
IDLE_KINDS = frozenset({"socket", "queue", "message-queue", "condition", "sleep", "subprocess", "event-loop",
                        "read", "park", "join"})
# Waits that work from outside the tree (a client, a timer) can end; every other idle wait needs
# another thread of the tree.
OUTSIDE_KINDS = frozenset({"socket", "message-queue", "event-loop", "sleep"})
# Waits on another process or thread of the tree (its end).
WAITS_ON_OTHER = frozenset({"subprocess", "join"})
# A thread py-spy marks idle (in a C call) in the program's own line, with no frame below it and a
# line that does not say which call (analyze/hidden_call.py): blocked in a call Python does not show.
BLOCKED_CALL = "blocked-call"


@dataclass(frozen=True)
class Rule:
    """A frame shape that says what a thread waits on (a GPU sync, a collective, a lock)."""
    category: str
    kind: str
    function: re.Pattern
    file: re.Pattern | None = None      # Python rules: the file the function is in
    rank: int = 0                       # host rules: the higher wins (a queue over its lock)
    background: bool = False            # a thread that always waits like this (NCCL's proxy, the watchdog)


def _sym(names: str) -> re.Pattern:
    """A native symbol, namespaced or not, with or without its argument list."""
    return re.compile(rf"(?:^|::)(?:{names})(?:\(|$|<|@)")


def _py(func: str, file: str) -> tuple[re.Pattern, re.Pattern]:
    return re.compile(rf"^(?:\w+\.)*(?:{func})$"), re.compile(rf"(?:^|/)(?:{file})$")


HELPER = "helper"
# The helpers real servers carry, by a frame anywhere in the thread's stack: each waits like this
# for its whole life and runs no user code (a thread pool's worker does, so it is not one: idle, it
# waits in a queue like any other). gRPC's and rayon's threads have no Python frame: py-spy never
# shows them, gdb does.
HELPERS: tuple[Rule, ...] = (
    Rule(HOST, "resource-tracker", *_py(r"main", r"multiprocessing/(?:resource|semaphore)_tracker\.py"),
         background=True),
    Rule(HOST, "forkserver", *_py(r"main", r"multiprocessing/forkserver\.py"), background=True),
    Rule(HOST, "queue-feeder", *_py(r"_feed", r"multiprocessing/queues\.py"), background=True),
    Rule(HOST, "pool-handler", *_py(r"_handle_workers|_handle_tasks|_handle_results|_wait_for_updates",
                                    r"multiprocessing/pool\.py"), background=True),
    Rule(HOST, "executor-manager", *_py(r"run|wait_result_broken_or_wakeup", r"concurrent/futures/process\.py"),
         background=True),
    Rule(HOST, "pin-memory", *_py(r"_pin_memory_loop", r"torch/utils/data/_utils/pin_memory\.py"), background=True),
    Rule(HOST, "monitor", *_py(r"run", r"tqdm/_monitor\.py"), background=True),
    Rule(HOST, "watchdog", _sym(r"faulthandler_thread"), background=True),
    Rule(HOST, "rayon-pool", _sym(r"(?:<)?rayon_core(?:\[\w+\])?::(?:registry|sleep)::\S*"), background=True),
    Rule(HOST, "openmp-pool", _sym(r"gomp_thread_start|gomp_team_barrier_wait\w*|gomp_barrier_wait\w*|"
                                   r"__kmp_suspend\w*|__kmp_fork_barrier|__kmp_launch_worker|__kmp_launch_thread"),
         background=True),
    Rule(HOST, "grpc-internal", _sym(r"grpc_core::(?:\w+::)*(?:Executor|Timer\w*|Lifeguard\w*|ThreadPool\w*)"
                                     r"(?:::\w+)*|grpc_event_engine::(?:\w+::)*\w*ThreadPool\w*(?:::\w+)*|"
                                     r"gpr_cv_wait"), background=True),
    Rule(HOST, "zmq-io", _sym(r"zmq::(?:epoll_t::loop|worker_poller_base_t::worker_routine|thread_t::"
                              r"thread_routine)"), background=True),
    Rule(HOST, "ray-internal", _sym(r"ray::core::CoreWorker::RunIOService|ray::(?:\w+::)*\w*IoService\w*|"
                                    r"boost::asio::detail::scheduler::(?:run|do_run_one)"), background=True),
)
# Helper threads of stripped libraries, by the thread's name (/proc's comm: 15 characters at most).
HELPER_THREAD_NAMES = re.compile(r"QueueFeederThread|ZMQbg/\S+|lifeguard|event_engine|grpc_global_tim\w*|"
                                 r"default-executo\w*|resolver-execut\w*|timer_manager|pt_autograd_\d+")
# Whole helper processes, by their command line (every one of their threads is the helper).
HELPER_COMMANDS = re.compile(r"from multiprocessing\.(?:resource_tracker|semaphore_tracker|forkserver) import main")

RULES: tuple[Rule, ...] = (
    # --- collectives (rule 1): the background threads every NCCL process has
    Rule(COLLECTIVE, "nccl-proxy", _sym(r"ncclProxy\w*|proxyService\w*|persistentSocketThread"), background=True),
    Rule(COLLECTIVE, "watchdog", _sym(r"ncclCommWatchdog|watchdogHandler|Watchdog::run|heartbeatMonitor|"
                                      r"HeartbeatMonitor::\w+"), background=True),
    Rule(COLLECTIVE, "nccl-call", _sym(r"nccl(?:AllReduce|AllGather|ReduceScatter|Broadcast|Bcast|Reduce|Send|Recv|"
                                       r"AllToAll\w*|GroupEnd|CommInitRank\w*|CommSplit|CommFinalize|CommAbort|"
                                       r"CommDestroy)")),
    Rule(COLLECTIVE, "work-wait", _sym(r"Work\w*::(?:wait|synchronize\w*)|gloo::(?:\w+::)*(?:wait\w*)")),
    Rule(COLLECTIVE, "store", _sym(r"\w*Store::(?:get|wait|check)|TCPClient::\w*[rR]ecv\w*")),
    Rule(COLLECTIVE, "collective-call",
         *_py(r"all_reduce|all_gather\w*|reduce_scatter\w*|broadcast|barrier|monitored_barrier|reduce|send|recv|"
              r"all_to_all\w*|gather|scatter|wait", r"torch/distributed/distributed_c10d\.py|distributed_c10d\.py")),
    # --- the GPU (rule 2)
    Rule(GPU, "rocr-signal-wait", _sym(r"hsa_signal_wait_\w+|hsa_amd_signal_wait_any|"
                                       r"(?:\w+::)*\w*Signal::Wait\w*|hsaKmtWaitOnEvent\w*|hsaKmtWaitOnMultipleEvents\w*")),
    Rule(GPU, "synchronize", _sym(r"(?:cuda|hip)(?:Device|Stream|Event|Ctx)Synchronize\w*|"
                                  r"cu(?:Stream|Event|Ctx)Synchronize\w*|device_synchronize|"
                                  r"(?:\w+::)*(?:CUDA|HIP)(?:Stream|Event)::synchronize")),
    Rule(GPU, "blocking-copy", _sym(r"(?:cuda|hip)Memcpy(?:DtoH|2D|FromSymbol)?|cuMemcpy(?:DtoH|HtoD)?(?:_v2)?")),
    Rule(GPU, "item", _sym(r"(?:\w+::)*_local_scalar_dense\w*")),
    Rule(GPU, "query", _sym(r"(?:cuda|hip)(?:Stream|Event)Query|cu(?:Stream|Event)Query\w*")),
    Rule(GPU, "torch.cuda.synchronize", *_py(r"synchronize", r"torch/cuda/__init__\.py|torch/cuda/streams\.py")),
    # --- the host (rule 3), by rank
    Rule(HOST, "queue", *_py(r"get|get_nowait|_recv_bytes|recv|_poll", r"queue\.py|multiprocessing/queues\.py|"
                                                                         r"multiprocessing/connection\.py"), rank=5),
    Rule(HOST, "message-queue", _sym(r"zmq_poll|zmq_msg_recv|zmq_recv\w*|zmq::\w+::(?:\w*poll\w*|recv\w*)"), rank=5),
    Rule(HOST, "message-queue", *_py(r"\w*recv\w*|poll", r"zmq/.*\.py"), rank=5),
    Rule(HOST, "subprocess", *_py(r"wait|_wait|_try_wait|communicate|poll",
                                  r"subprocess\.py|multiprocessing/popen_\w+\.py"), rank=5),
    Rule(HOST, "event-loop", *_py(r"run_forever|_run_once|run_until_complete|select",
                                  r"asyncio/base_events\.py|uvloop/.*|selectors\.py"), rank=4),
    Rule(HOST, "socket", *_py(r"accept|recv\w*|serve_forever|select|poll|handle_request",
                              r"socket\.py|socketserver\.py|ssl\.py"), rank=4),
    Rule(HOST, "socket", _sym(r"accept4?|recv(?:from|msg|mmsg)?|__libc_recv\w*|poll|ppoll|__poll|__GI___poll|"
                              r"select|pselect6?|__select|epoll_wait|epoll_pwait2?|__GI_epoll_wait|uv__io_poll|"
                              r"sock_accept\w*|sock_recv\w*|select_\w+|poll_poll"), rank=3),
    Rule(HOST, "subprocess", _sym(r"wait4|__GI___wait4|__wait4|waitpid|__waitpid|waitid|os_waitpid\w*|os_wait\w*"),
         rank=3),
    Rule(HOST, "sleep", _sym(r"clock_nanosleep|__GI___clock_nanosleep|__clock_nanosleep\w*|nanosleep|__nanosleep|"
                             r"usleep|time_sleep|pysleep|sleep_for|sleep"), rank=3),
    Rule(HOST, "condition", *_py(r"wait|Condition\.wait|Event\.wait|Barrier\.wait", r"threading\.py"), rank=2),
    Rule(HOST, "condition", _sym(r"pthread_cond_(?:timed|clock)?wait\w*|___pthread_cond_(?:timed|clock)?wait\w*|"
                                 r"__pthread_cond_wait\w*|(?:std::)?condition_variable::wait\w*"), rank=2),
    Rule(HOST, "join", *_py(r"join|_wait_for_tstate_lock", r"threading\.py"), rank=2),
    # a native thread joining another (glibc's pthread_join: nptl/pthread_join_common.c)
    Rule(HOST, "join", _sym(r"_{0,3}pthread_(?:clock|timed|try)?join\w*"), rank=2),
    Rule(HOST, "lock", *_py(r"acquire|Lock\.acquire|RLock\.acquire|_acquire_restore", r"threading\.py"), rank=1),
    # A mutex is held by someone: waiting on it is a lock. Python's own lock primitive is the lock of
    # both Lock.acquire and Condition.wait: a Python frame above says which (`py-lock`, see classify).
    # glibc's own names too, as gdb shows them with its debug info: `___pthread_mutex_lock`,
    # `__GI___lll_lock_wait`, `lll_mutex_lock_optimized` (nptl/pthread_mutex_lock.c, lowlevellock.c)
    Rule(HOST, "lock", _sym(r"_{0,3}pthread_mutex_(?:timed)?lock\w*|(?:__GI_)?__lll_lock_wait\w*|lll_mutex_lock\w*|"
                            r"pthread_rwlock_\w*lock|(?:std::)?mutex::lock"), rank=1),
    Rule(HOST, "py-lock", _sym(r"PyThread_acquire_lock\w*|lock_PyThread_acquire_lock|acquire_timed"), rank=1),
    # A bare futex or semaphore wait is how pool threads (rayon, gRPC, OpenMP) sleep until given work.
    Rule(HOST, "park", _sym(r"sem_wait|sem_timedwait|__new_sem_wait\w*|do_futex_wait\w*|futex_wait\w*|"
                            r"__futex_abstimed_wait\w*|futex_abstimed_wait\w*|syscall"), rank=0),
    Rule(HOST, "read", _sym(r"read|__libc_read|__GI___libc_read|__read_nocancel|_io_\w*read\w*"), rank=0),
)


@dataclass(frozen=True)
class Wait:
    """What one thread waits on, read from its stack by the rules, with the frame that says it."""
    category: str                   # gpu | collective | host | running | unknown
    kind: str                       # the rule's kind: synchronize, nccl-call, socket, lock ...
    frame: StackFrame | None        # the frame that says it
    where: StackFrame | None        # the thread's own innermost code frame: file:line function
    background: bool = False

    @property
    def idle(self) -> bool:
        """A host wait for work (a socket, a queue, a sleep), or a background thread's wait."""
        return self.background or (self.category == HOST and self.kind in IDLE_KINDS)

    @property
    def on(self) -> str:
        """What it waits on, in words: `hipStreamSynchronize (GPU)`."""
        if self.category in (RUNNING, UNKNOWN):
            return self.category
        if self.kind == BLOCKED_CALL:
            return "a call Python does not show (host: blocked-call; run py-spy with --native to see which)"
        if self.frame is not None and self.frame.code:       # a hidden call's line: `with b:` is the lock
            return f"'{self.frame.code}' ({self.category}: {self.kind})"
        name = self.frame.function if self.frame and self.frame.function else self.kind
        return f"{name.split('(')[0]} ({self.category}: {self.kind})"


def matches(rule: Rule, frame: StackFrame) -> bool:
    if not frame.function:
        return False
    if rule.file is not None:
        return not frame.native and bool(frame.file) and bool(rule.file.search(frame.file)) \
            and bool(rule.function.search(frame.function))
    return frame.native and bool(rule.function.search(frame.function))


def _rule_of(frame: StackFrame, categories: tuple[str, ...]) -> Rule | None:
    return next((r for r in RULES if r.category in categories and matches(r, frame)), None)


def own_frame(frames: list[StackFrame]) -> int | None:
    """Index of the thread's own innermost code: a Python frame that is no known wait and not the
    standard library (site-packages is the user's: vLLM's scheduler is where a user looks)."""
    for i, f in enumerate(frames):
        if f.native or not f.function:
            continue
        if _rule_of(f, (GPU, COLLECTIVE, HOST)) is None and not _stdlib(f.file):
            return i
    return None


# Libraries whose frames are never where a user looks (torch's c10d logging wrapper around a
# collective, asyncio's loop); a server's own package in site-packages (vLLM, SGLang) is.
# py-spy prints a file as its path below the sys.path entry it was imported from
# (`torch/distributed/c10d_logger.py`): a library's frames are known by that short path too.
LIBRARY_PATHS = re.compile(r"(?:/(?:site|dist)-packages/|^)(?:torch|triton|zmq|uvloop|concurrent|multiprocess)/")


def _stdlib(path: str | None) -> bool:
    if not path:
        return False
    if re.search(r"/lib/python3\.\d+/(?!site-packages/|dist-packages/)", path) or LIBRARY_PATHS.search(path):
        return True
    return "/" not in path and path in STDLIB_BASENAMES    # py-spy's text prints short names


STDLIB_BASENAMES = frozenset({"threading.py", "queue.py", "selectors.py", "socket.py", "socketserver.py",
                              "subprocess.py", "base_events.py", "events.py", "runners.py", "ssl.py",
                              "connection.py", "queues.py", "popen_fork.py", "process.py", "<frozen runpy>",
                              # decorators' wrappers (functools.wraps, contextlib's context managers)
                              "functools.py", "contextlib.py"})


def helper_of(thread: ThreadStack, command: str | None = None) -> Rule | None:
    """The helper this thread is (HELPERS, by a frame, its name, or its process's command line)."""
    for f in thread.frames:
        r = next((r for r in HELPERS if matches(r, f)), None)
        if r is not None:
            return r
    if thread.name and HELPER_THREAD_NAMES.fullmatch(thread.name):
        return Rule(HOST, "helper-thread", re.compile(re.escape(thread.name)), background=True)
    if command and HELPER_COMMANDS.search(command):
        return Rule(HOST, "helper-process", re.compile(""), background=True)
    return None


def classify(thread: ThreadStack, command: str | None = None) -> Wait:
    """`command`: the process's command line, where known (a helper process is known by it)."""
    frames = thread.frames
    own = own_frame(frames)
    where = frames[own] if own is not None else next((f for f in frames if not f.native), None)
    helper = helper_of(thread, command)
    if helper is not None:
        at = next((f for f in frames if matches(helper, f)), frames[0] if frames else None)
        return Wait(HOST, helper.kind, at, where, True)
    for cats in ((COLLECTIVE,), (GPU,)):
        for i, f in enumerate(frames):
            r = _rule_of(f, cats)
            if r is not None:
                if r.category == COLLECTIVE and r.file is not None:     # a native NCCL frame says more: kept
                    f, r = _called(frames, i, own, f, r)
                return Wait(r.category, r.kind, f, where or caller(frames, i), r.background)
    below = frames[:own] if own is not None else frames
    best: tuple[Rule, StackFrame] | None = None
    for f in below:
        r = _rule_of(f, (HOST,))
        if r is not None and (best is None or r.rank > best[0].rank):
            best = (r, f)
    if best is not None:
        kind = best[0].kind
        if kind == "py-lock":      # under a Python frame a Lock.acquire; in a native-only stack, which one is unknown
            kind = "lock" if any(not f.native for f in frames) else "park"
        return Wait(HOST, kind, best[1], where or caller(frames, frames.index(best[1])))
    hidden = _hidden_call(thread, own)
    if hidden is not None:
        return hidden
    on_cpu = thread.active is True or thread.state == "R"
    return Wait(RUNNING if on_cpu else UNKNOWN, "on-cpu" if on_cpu else "unknown", frames[0] if frames else None, where)


def _called(frames: list[StackFrame], i: int, own: int | None, f: StackFrame, r: Rule) -> tuple[StackFrame, Rule]:
    """The call the user made: of the library's Python wait frames between the innermost one and the
    thread's own code, the outermost (`barrier` over the `_store_based_barrier` it calls), so the wait
    reads as the collective the program called."""
    end = own if own is not None else len(frames)
    for f2 in reversed(frames[i:end]):
        r2 = _rule_of(f2, (r.category,))
        if r2 is not None and r2.file is not None and not r2.background:
            return f2, r2
    return f, r


def _hidden_call(thread: ThreadStack, own: int | None) -> Wait | None:
    """py-spy without --native: a thread it marks idle (the GIL released: in a C call) whose
    innermost frame is the program's own code waits in a builtin that has no frame; its source
    line (the frame's `code`, read by ingest/source_lines.py) says which (a `with lock:` is a lock),
    else it is a call only --native names."""
    frames = thread.frames
    if thread.active is not False or own != 0 or any(f.native for f in frames):
        return None
    f = frames[0]
    kind = kind_of_line(f.code)
    return Wait(HOST, kind or BLOCKED_CALL, f, f)


RUNTIME_PREFIXES = ("hip", "cuda", "cu", "hsa", "rocr::", "amd::", "roc::", "ihip", "nccl", "rccl", "c10::",
                    "c10d::", "at::", "torch::", "std::", "__", "gloo::", "Py", "_Py", "pthread_", "start_thread",
                    # glibc's internals (nptl's lock and futex helpers, the thread's start)
                    "lll_", "futex_", "clone")


def caller(frames: list[StackFrame], i: int) -> StackFrame | None:
    """A native stack's place for a user: the first caller of the wait with a source line that is
    not the runtime's own (the program's `main () at server.cpp:88`), else the wait frame itself."""
    for f in frames[i + 1:]:
        if f.file and f.line and f.function and not f.function.startswith(RUNTIME_PREFIXES):
            return f
    # none of the program's own: the innermost frame from the wait outward that has a file:line
    return next((f for f in frames[i:] if f.file and f.line), frames[i] if frames[i].file else None)


def signature(thread: ThreadStack, depth: int = 12, wait: Wait | None = None) -> tuple:
    """What has to change for a thread to have moved: its innermost frames (a loop that calls
    the same wait again and again keeps its stack, so it has not moved either). For a GPU or
    collective wait, the frames from the wait's own frame outward: inside it the runtime polls
    (a synchronize on a spinning kernel on the H200 showed 6 libcuda frames under
    cuCtxSynchronize_v2 in one sample and 9 other ones in the next), and that is the same wait."""
    frames = thread.frames
    if wait is not None and wait.category in (GPU, COLLECTIVE) and wait.frame is not None:
        at = next((i for i, f in enumerate(frames) if f is wait.frame), None)
        if at is not None:
            frames = frames[at:]
    return tuple((f.function, f.file, f.line) for f in frames[:depth])
