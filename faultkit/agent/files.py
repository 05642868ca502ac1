"""The agent's file names inside a bundle and the variables that switch it on: the one place that
knows them, for the agent (loaded by path into the target, so standard library only), capture and
the reader."""

from __future__ import annotations

DIR = "agent"                         # the bundle's folder of per-process agent files
ENV_DIR = "FAULTKIT_AGENT_DIR"        # where this process writes (absolute); unset: the agent does nothing
ENV_MODE = "FAULTKIT_AGENT_MODE"      # "segments" (default) or "blocks" (--alloc-history)
ENV_CACHE = "FAULTKIT_AGENT_CACHE"    # where the compiled allocator tracker is kept between runs
ENV_LAUNCHES = "FAULTKIT_AGENT_LAUNCHES"   # "1": Triton launches into a ring too
# The amplifiers the agent applies (faultkit amplify; faultkit/agent/amplify.py, poison.cpp):
ENV_JITTER = "FAULTKIT_AMPLIFY_JITTER"          # call sites (`function` or `module:function`, comma-separated)
ENV_JITTER_MS = "FAULTKIT_AMPLIFY_JITTER_MS"    # the most a site is delayed, in ms (uniform from 0)
ENV_SEED = "FAULTKIT_AMPLIFY_SEED"              # the jitter's seed (with the trial index: each trial repeatable)
ENV_HOLD = "FAULTKIT_AMPLIFY_HOLD"              # call sites whose locals owning memory are held at return
ENV_HOLD_MS = "FAULTKIT_AMPLIFY_HOLD_MS"        # for this long
ENV_HOLD_MAX = "FAULTKIT_AMPLIFY_HOLD_MAX"      # and at most this many returns' worth
ENV_RELEASE = "FAULTKIT_AMPLIFY_RELEASE"        # call sites at whose return the CUDA cache goes back to the driver
ENV_POISON = "FAULTKIT_AMPLIFY_POISON"          # a byte (0x7f): freed CUDA blocks are filled with it
ENV_POISON_MIN = "FAULTKIT_AMPLIFY_POISON_MIN_BYTES"   # smaller blocks are not filled
AMPLIFY_ENV = (ENV_JITTER, ENV_JITTER_MS, ENV_SEED, ENV_HOLD, ENV_HOLD_MS, ENV_HOLD_MAX, ENV_RELEASE, ENV_POISON,
               ENV_POISON_MIN)
# What the header's `armed` list says once an amplifier is in place in that process
ARMED_JITTER, ARMED_HOLD, ARMED_POISON = "amplify-jitter", "amplify-hold", "amplify-poison"
ARMED_RELEASE = "amplify-release"     # said at the first release done (CUDA started), not when merely asked
STACK_SIGNAL = "SIGUSR2"              # faultkit asks a live process for every thread's stack with it

HEADER = ".json"          # <pid>.json: the process, what the agent armed, what failed
STACKS = ".stacks.txt"    # <pid>.stacks.txt: faulthandler's dumps (fatal ones and those asked for)
ALLOC_RING = ".alloc.ring"    # <pid>.alloc.ring: the allocator's events
SITES = ".sites.tsv"      # <pid>.sites.tsv: id, Python site (file:line function), innermost frame
LAUNCH_RING = ".launch.ring"  # <pid>.launch.ring: kernel launches seen by a host hook


def name(pid: int, suffix: str) -> str:
    return f"{pid}{suffix}"


def split(filename: str) -> tuple[int, str] | None:
    """`1234.alloc.ring` -> (1234, ".alloc.ring"); None for a name that is not an agent file."""
    head, dot, rest = filename.partition(".")
    if not (head.isascii() and head.isdigit() and len(head) <= 10) or not dot or "." + rest not in (HEADER, STACKS, ALLOC_RING, SITES, LAUNCH_RING):
        return None
    return int(head), "." + rest
