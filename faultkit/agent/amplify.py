"""The amplifiers the agent applies inside the target (asked for by `faultkit amplify` through the
variables in files.py): loaded by path, standard library only, and never the target's problem.

- jitter: at the start of each chosen call site (a scheduler's step, a request's hand-off) the
  thread sleeps a seeded random 0..JITTER_MS ms. Host timing is what a race between the host and a
  running kernel, or between two threads, depends on: perturbing it makes a rare interleaving come
  (or go) and says the bug is a race.
- hold-back: when a chosen call site returns, the objects in its locals that own memory (anything
  with a `data_ptr()`: torch tensors, the sample's CPU stand-in blocks) are kept alive for HOLD_MS ms
  (at most HOLD_MAX returns' worth), so the allocator cannot hand their blocks to anyone else for
  that long. A crash that goes away with it was a freed block reused too soon.
- release: when a chosen call site is entered, PyTorch's CUDA cache is emptied (torch.cuda.empty_cache):
  what was freed before goes back to the driver, so a read through a stale pointer in the call faults
  inside a segment the black box saw released (it names the block, where it was allocated and how
  long before the fault it was freed), where caching off (the free bypasses the allocator and its
  trace) leaves the black box nothing to name.

Where the call sites are seen: sys.monitoring (Python 3.12+) with every other code object disabled
after its first call (no cost after that), else sys.setprofile in every thread (a Python call per
call and return: slower; the report says which). The header records each site's first hit: the
proof that the amplifier reached the process and the code, not only that a variable was set.
"""

from __future__ import annotations

import collections
import os
import random
import sys
import threading
import time

TOOL_IDS = (3, 4)            # sys.monitoring ids no standard tool takes (0 debugger, 1 coverage, 2 profiler, 5 optimizer)


class Site:
    """`function`, `Class.method` or `module:function` (module: its __name__, the file's stem, or a
    path ending; `__main__` scripts match by their file's stem)."""

    def __init__(self, text: str):
        self.text = text.strip()
        mod, sep, name = self.text.rpartition(":")
        self.module = mod if sep else None
        self.name = name

    def matches(self, code, globals_) -> bool:
        if self.name not in (code.co_name, getattr(code, "co_qualname", code.co_name)):
            return False
        if self.module is None:
            return True
        fname = code.co_filename
        stem = os.path.splitext(os.path.basename(fname))[0]
        modname = (globals_ or {}).get("__name__", "")
        return self.module in (modname, stem) or fname.endswith(self.module.replace(".", os.sep) + ".py")


def sites(text: str | None) -> list[Site]:
    return [Site(t) for t in (text or "").split(",") if t.strip()]


class Amplifier:
    def __init__(self, env: dict, files, header: dict, armed, fail, save):
        self.files, self.header, self.armed, self.fail, self.save = files, header, armed, fail, save
        self.jitter = sites(env.get(files.ENV_JITTER))
        self.hold = sites(env.get(files.ENV_HOLD))
        self.release = sites(env.get(files.ENV_RELEASE))
        self.jitter_ms = _number(env.get(files.ENV_JITTER_MS), 2.0)
        self.hold_ms = _number(env.get(files.ENV_HOLD_MS), 1000.0)
        self.hold_max = int(_number(env.get(files.ENV_HOLD_MAX), 8))
        seed = env.get(files.ENV_SEED) or "0"
        trial = env.get("FAULTKIT_TRIAL_INDEX") or "0"
        self.rng = random.Random(f"faultkit-jitter:{seed}:{trial}")   # the same delays in every run of this trial
        self.decided: dict = {}          # code object -> (jitter site, hold site) or None
        self.held: collections.deque = collections.deque()
        self.lock = threading.Lock()
        self.hits: dict[str, int] = {}
        self.report = {"mechanism": None}
        if self.jitter:
            self.report["jitter"] = {"sites": [s.text for s in self.jitter], "max_ms": self.jitter_ms, "seed": seed}
        if self.hold:
            self.report["hold"] = {"sites": [s.text for s in self.hold], "ms": self.hold_ms, "max": self.hold_max,
                                   "held_objects": 0}
        if self.release:
            self.report["release"] = {"sites": [s.text for s in self.release], "released": 0}
        self.report["hits"] = self.hits
        header["amplify"] = self.report

    def rebind(self, header: dict, armed, fail, save) -> None:
        """A forked child: the instrumentation came with the fork; its own header and counts start here."""
        self.header, self.armed, self.fail, self.save = header, armed, fail, save
        self.hits = {}
        self.report = dict(self.report, hits=self.hits)
        self.report.pop("first_hit", None)
        header["amplify"] = self.report
        if self.jitter:
            armed(self.files.ARMED_JITTER)
        if self.hold:
            armed(self.files.ARMED_HOLD)

    @property
    def wanted(self) -> bool:
        return bool(self.jitter or self.hold or self.release)

    # ---- which code objects are sites ----
    def decide(self, code, globals_):
        d = self.decided.get(code, False)
        if d is False:
            j = next((s for s in self.jitter if s.matches(code, globals_)), None)
            h = next((s for s in self.hold if s.matches(code, globals_)), None)
            r = next((s for s in self.release if s.matches(code, globals_)), None)
            d = (j, h, r) if (j or h or r) else None
            self.decided[code] = d
        return d

    def hit(self, site: Site) -> None:
        n = self.hits.get(site.text, 0) + 1
        self.hits[site.text] = n
        if n == 1:                      # the first hit is the proof it reached this code: written at once
            self.report.setdefault("first_hit", {})[site.text] = time.time()
            self.save()

    # ---- what the amplifiers do ----
    def on_start(self, site: Site) -> None:
        self.hit(site)
        with self.lock:
            delay = self.rng.random() * self.jitter_ms / 1000.0
        if delay > 0:
            time.sleep(delay)

    def on_return(self, site: Site, frame) -> None:
        self.hit(site)
        try:
            keep = [v for v in frame.f_locals.values() if callable(getattr(v, "data_ptr", None))]
        except Exception:
            keep = []
        now = time.monotonic()
        with self.lock:
            self.held.append((now, keep))
            self.report["hold"]["held_objects"] += len(keep)
            expired = []
            while self.held and (len(self.held) > self.hold_max or now - self.held[0][0] > self.hold_ms / 1000.0):
                expired.append(self.held.popleft())
        del expired                      # released here, in the program's own thread, outside the lock

    def on_release(self, site: Site) -> None:
        self.hit(site)
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None)
        if cuda is None or not cuda.is_initialized():
            return                       # nothing cached yet (or no CUDA): nothing released, nothing claimed
        cuda.empty_cache()
        info = self.report["release"]
        info["released"] += 1
        if info["released"] == 1:       # armed only once it really acted in this process
            self.armed(self.files.ARMED_RELEASE)
            self.save()

    # ---- where they are seen ----
    def install(self) -> None:
        mon = getattr(sys, "monitoring", None)
        if mon is not None and self._monitoring(mon):
            self.report["mechanism"] = "sys.monitoring"
        else:
            sys.setprofile(self._profile)
            threading.setprofile(self._profile)
            self.report["mechanism"] = "sys.setprofile (every call and return: slower)"
        if self.jitter:
            self.armed(self.files.ARMED_JITTER)
        if self.hold:
            self.armed(self.files.ARMED_HOLD)

    def _monitoring(self, mon) -> bool:
        tool = None
        for t in TOOL_IDS:
            if mon.get_tool(t) is None:
                tool = t
                break
        if tool is None:
            self.fail("amplifier", RuntimeError("no free sys.monitoring tool id"))
            return False
        mon.use_tool_id(tool, "faultkit-amplify")
        ev = mon.events
        disable = mon.DISABLE

        def start(code, offset):
            try:
                d = self.decide(code, sys._getframe(1).f_globals)
                if d is None:
                    return disable
                if d[2] is not None:
                    self.on_release(d[2])
                if d[0] is not None:
                    self.on_start(d[0])
            except Exception as exc:     # never the target's problem
                self.fail("amplifier", exc)
            return None

        def ret(code, offset, value):
            try:
                d = self.decide(code, sys._getframe(1).f_globals)
                if d is None or d[1] is None:
                    return disable
                self.on_return(d[1], sys._getframe(1))
            except Exception as exc:
                self.fail("amplifier", exc)
            return None

        mon.register_callback(tool, ev.PY_START, start)
        mon.register_callback(tool, ev.PY_RETURN, ret)
        mon.set_events(tool, ev.PY_START | ev.PY_RETURN)
        return True

    def _profile(self, frame, event, arg):
        if event not in ("call", "return"):
            return
        d = self.decide(frame.f_code, frame.f_globals)
        if d is None:
            return
        try:
            if event == "call" and d[2] is not None:
                self.on_release(d[2])
            if event == "call" and d[0] is not None:
                self.on_start(d[0])
            elif event == "return" and d[1] is not None:
                self.on_return(d[1], frame)
        except Exception as exc:         # never the target's problem
            self.fail("amplifier", exc)


def _number(text, default: float) -> float:
    try:
        v = float(text)
        return v if v >= 0 else default
    except (TypeError, ValueError):
        return default


def arm(files, header: dict, armed, fail, save) -> Amplifier | None:
    amp = Amplifier(os.environ, files, header, armed, fail, save)
    if not amp.wanted:
        header.pop("amplify", None)
        return None
    amp.install()
    return amp
