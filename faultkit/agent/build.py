"""Building the allocator tracker (tracker.cpp) against the torch this process imported.

The build runs once per torch install and source version (about half a minute), in a background
thread of the first process that needs it, under a file lock (several workers starting together
build it once); the result is cached (FAULTKIT_AGENT_CACHE, else ~/.cache/faultkit/agent). A
process that finds it cached attaches at CUDA start with no delay. Standard library only: this is
loaded by file path into the target's interpreter. Also runnable as a script, to build ahead:
`python3 faultkit/agent/build.py` (with the target's python).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "tracker.cpp")
CACHE_ENV = "FAULTKIT_AGENT_CACHE"
COMPILER_TIMEOUT_S = 600
HIP_ONLY = "the tracker is built for CUDA only"
NOTHING_TO_BUILD = 3        # the script's exit status where the torch it would import has no CUDA


def torch_without_cuda() -> str | None:
    """Why there is nothing to build for the torch this interpreter would import, read from its
    version.py without importing it (a CPU torch's import is 2 s of the build-ahead that then fails to
    compile): None where it is a CUDA build, has no torch, or cannot be told (the build finds out)."""
    import ast
    import importlib.util
    try:
        spec = importlib.util.find_spec("torch")
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        with open(os.path.join(folders[0], "version.py"), encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (ImportError, ValueError, IndexError, OSError, SyntaxError):
        return None
    values = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) and node.value is not None else None
        if isinstance(target, ast.Name):
            try:
                values[target.id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    if "cuda" not in values or values["cuda"] is not None:
        return None
    version = values.get("__version__", "?")
    if values.get("hip"):
        return f"a ROCm (HIP) build of torch ({version}): {HIP_ONLY}"
    return f"a CPU build of torch ({version}): no CUDA allocator to track"


def cache_dir() -> str:
    return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "faultkit", "agent")


def cuda_includes() -> list[str]:
    """CUDA's runtime headers, which c10's allocator header includes: CUDA_HOME, /usr/local/cuda,
    or the nvidia-cuda-runtime wheel beside torch."""
    out = []
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda", "/opt/cuda"):
        if root and os.path.exists(os.path.join(root, "include", "cuda_runtime_api.h")):
            out.append(os.path.join(root, "include"))
    for p in sys.path:
        for sub in ("nvidia/cuda_runtime/include", "nvidia/cu13/include", "nvidia/cu12/include"):
            d = os.path.join(p, sub)
            if os.path.exists(os.path.join(d, "cuda_runtime_api.h")):
                out.append(d)
    return out


class Build:
    def __init__(self, torch, source: str = SOURCE, stem: str = "tracker"):
        # `source`: tracker.cpp, or poison.cpp (the amplifier's own library, built only when asked)
        self.source = source
        self.torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
        self.version = str(getattr(torch, "__version__", "?"))
        self.abi = int(bool(getattr(getattr(torch, "_C", None), "_GLIBCXX_USE_CXX11_ABI", True)))
        self.hip = bool(getattr(getattr(torch, "version", None), "hip", None))
        self.library: str | None = None
        self.problem: str | None = None
        self.seconds: float | None = None
        self.done = threading.Event()
        with open(source, "rb") as fh:
            src = fh.read()
        key = hashlib.sha256(b"\0".join([src, self.version.encode(), self.torch_dir.encode(),
                                         sys.version.encode(), str(self.abi).encode()])).hexdigest()[:16]
        self.target = os.path.join(cache_dir(), f"{stem}-{key}.so")

    def start(self) -> None:
        if os.path.exists(self.target):
            self.library = self.target
            self.seconds = 0.0
            self.done.set()
            return
        threading.Thread(target=self._run, name="faultkit-agent-build", daemon=True).start()

    def _run(self) -> None:
        try:
            self._build()
        except BaseException as exc:
            self.problem = f"{type(exc).__name__}: {exc}"
        finally:
            self.done.set()

    def command(self, out: str) -> list[str] | None:
        cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
        if cxx is None:
            self.problem = "no C++ compiler (g++, c++, clang++) on PATH"
            return None
        if self.hip:
            self.problem = f"a ROCm (HIP) build of torch: {HIP_ONLY}"
            return None
        inc = cuda_includes()
        if not inc:
            self.problem = "CUDA's headers (cuda_runtime_api.h) not found: set CUDA_HOME"
            return None
        lib = os.path.join(self.torch_dir, "lib")
        return [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", f"-D_GLIBCXX_USE_CXX11_ABI={self.abi}",
                "-I", os.path.join(self.torch_dir, "include"), *[a for d in inc for a in ("-I", d)],
                self.source, "-o", out, "-L", lib, "-lc10_cuda", "-lc10", f"-Wl,-rpath,{lib}"]

    def _build(self) -> None:
        import fcntl
        os.makedirs(cache_dir(), exist_ok=True)
        with open(self.target + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)          # another process may be building it
            if os.path.exists(self.target):
                self.library = self.target
                self.seconds = 0.0
                return
            tmp = f"{self.target}.{os.getpid()}.tmp"
            cmd = self.command(tmp)
            if cmd is None:
                return
            t0 = time.monotonic()
            p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=COMPILER_TIMEOUT_S)
            self.seconds = round(time.monotonic() - t0, 1)
            if p.returncode != 0:
                self.problem = "the compiler failed: " + p.stdout.decode(errors="replace")[-1500:]
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                return
            os.replace(tmp, self.target)
            self.library = self.target


if __name__ == "__main__":
    # `python3 faultkit/agent/build.py [--poison]`: the tracker (and the poison library) built ahead, into
    # the cache every process of this torch then attaches from (faultkit amplify runs it before its trials)
    why = torch_without_cuda()
    if why is not None:
        print(f"nothing to build: {why}", flush=True)
        sys.exit(NOTHING_TO_BUILD)
    import torch
    ok = True
    for stem, source in [("tracker", SOURCE)] + ([("poison", os.path.join(HERE, "poison.cpp"))]
                                                  if "--poison" in sys.argv[1:] else []):
        b = Build(torch, source, stem)
        b.start()
        b.done.wait()
        print(f"{stem}:", b.library or f"not built: {b.problem}", f"({b.seconds} s)" if b.seconds is not None else "",
              flush=True)
        ok = ok and bool(b.library)
    sys.exit(0 if ok else 1)
