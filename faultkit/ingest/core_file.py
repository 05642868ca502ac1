"""Recognise core dumps by their content, not their name.

- CUDA GPU core (`CUDA_ENABLE_COREDUMP_ON_EXCEPTION`): ELF `ET_CORE`, machine NVIDIA CUDA (190),
  `.cudbg.*` sections (devices, contexts, modules, the excepting warp).
- ROCr GPU core (`gpucore.<pid>`): ELF `ET_CORE`, machine AMDGPU (224), one PT_NOTE named
  "AMDGPU" (agents and queues). rocgdb needs it merged with the host core first (`roccoremerge`).
- A unified ROCm core (what roccoremerge writes, or rocgdb's `gcore`): a host `ET_CORE` that
  also carries the "AMDGPU" note.
- A plain host core: `ET_CORE` of the CPU's machine, no AMDGPU note.

Only the ELF header, the section or program headers and the notes are read: a full core can be
hundreds of GB.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from ..model import Problem

ET_CORE = 4
EM_X86_64, EM_AARCH64, EM_CUDA, EM_AMDGPU = 62, 183, 190, 224
PT_NOTE = 4
NT_PRPSINFO = 3
MAX_NOTES = 64 << 20
MAX_SECTIONS = 1 << 20

CUDA, ROCM_GPU, ROCM_UNIFIED, HOST = "cuda", "rocm-gpu", "rocm-unified", "host"


@dataclass
class CoreFile:
    """A core dump found among the inputs: whose it is and which debugger can open it."""
    path: str
    platform: str                  # cuda | rocm-gpu | rocm-unified | host
    size: int
    pid: int | None = None         # from the file's name, where its pattern puts one
    machine: int | None = None
    session: int | None = None     # host cores: the process's session id (a capture's target leads its own)
    problems: list[Problem] = field(default_factory=list)


# Names the runtimes and faultkit give cores: cuda.<host>.<pid>.<time> (faultkit), core.cuda.<host>.<pid>,
# core_<time>_<host>_<pid>.nvcudmp, cudacore.<pid>, gpucore.<pid>[.gpu], gpucore.<host>.<pid>.<time>, core.<pid>.
PID_IN_NAME = [
    re.compile(r"^cuda\.[^/]*?\.(\d+)\.\d+(?:\.gz)?$"),
    re.compile(r"^core\.cuda\.[^/]*?\.(\d+)$"),
    re.compile(r"^core_\d+_[^/]*_(\d+)\.nvcudmp$"),
    re.compile(r"^(?:cuda|gpu)core\.(\d+)(?:\.gpu)?$"),
    re.compile(r"^gpucore\.[^/]*?\.(\d+)\.\d+$"),
    re.compile(r"^(?:core|host)\.(\d+)$"),
]


def pid_from_name(name: str) -> int | None:
    for rx in PID_IN_NAME:
        m = rx.match(name)
        if m:
            return int(m.group(1))
    return None


def is_core_header(head: bytes) -> bool:
    return len(head) >= 18 and head[:4] == b"\x7fELF" and struct.unpack_from("<H", head, 16)[0] == ET_CORE


def inspect_core(path: str | Path) -> CoreFile | None:
    """The core's platform, or None when the file is not an ELF core."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            head = fh.read(64)
            if not is_core_header(head) or head[4] != 2 or head[5] != 1:
                return None        # cores here are ELF64 little-endian
            size = p.stat().st_size
            machine = struct.unpack_from("<H", head, 18)[0]
            phoff, shoff = struct.unpack_from("<QQ", head, 32)
            phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", head, 54)
            core = CoreFile(str(p), HOST, size, pid_from_name(p.name), machine)
            if machine == EM_CUDA:
                names = _section_names(fh, shoff, shentsize, shnum, shstrndx, size)
                core.platform = CUDA
                if not any(n.startswith(".cudbg") for n in names):
                    core.problems.append(Problem(str(p), "an NVIDIA CUDA core without .cudbg sections: cut or not "
                                                         "written by the CUDA driver"))
                return core
            notes = _notes(fh, phoff, phentsize, phnum, size)
            amd_note = any(n == "AMDGPU" for n, _, _ in notes)
            prpsinfo = next((d for n, t, d in notes if n == "CORE" and t == NT_PRPSINFO and len(d) >= 28), None)
            if prpsinfo is not None and machine in (EM_X86_64, EM_AARCH64):
                # elf_prpsinfo (64-bit layout): pr_pid, pr_ppid, pr_pgrp, pr_sid at 24, 28, 32, 36
                core.pid, core.session = struct.unpack_from("<i", prpsinfo, 24)[0], \
                    struct.unpack_from("<i", prpsinfo, 36)[0] if len(prpsinfo) >= 40 else None
            if machine == EM_AMDGPU:
                core.platform = ROCM_GPU
                if not amd_note:
                    core.problems.append(Problem(str(p), "an AMDGPU core without its AMDGPU note: cut before the "
                                                         "runtime wrote the agents and queues"))
            elif amd_note:
                core.platform = ROCM_UNIFIED
            return core
    except (OSError, struct.error) as exc:
        return CoreFile(str(p), HOST, 0, pid_from_name(p.name), None,
                        [Problem(str(p), f"core unreadable ({getattr(exc, 'strerror', None) or exc})")])


def _section_names(fh, shoff: int, shentsize: int, shnum: int, shstrndx: int, size: int) -> list[str]:
    if not shoff or shentsize < 64 or shnum > MAX_SECTIONS or shoff + shnum * shentsize > size \
            or shstrndx >= shnum:
        return []
    fh.seek(shoff)
    table = fh.read(shnum * shentsize)
    str_off, str_size = struct.unpack_from("<QQ", table, shstrndx * shentsize + 24)
    if str_off + str_size > size or str_size > MAX_NOTES:
        return []
    fh.seek(str_off)
    strings = fh.read(str_size)
    out = []
    for i in range(shnum):
        name_off = struct.unpack_from("<I", table, i * shentsize)[0]
        end = strings.find(b"\0", name_off)
        out.append(strings[name_off:end if end >= 0 else None].decode("latin-1"))
    return out


def _notes(fh, phoff: int, phentsize: int, phnum: int, size: int) -> list[tuple[str, int, bytes]]:
    """(name, type, descriptor) of every note; descriptors past 4 KiB are cut (only small ones are read)."""
    if not phoff or phentsize < 56 or phnum > 65535 or phoff + phnum * phentsize > size:
        return []
    fh.seek(phoff)
    table = fh.read(phnum * phentsize)
    notes: list[tuple[str, int, bytes]] = []
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", table, i * phentsize)
        if p_type != PT_NOTE or p_offset + p_filesz > size:
            continue
        fh.seek(p_offset)
        data = fh.read(min(p_filesz, MAX_NOTES))
        at = 0
        while at + 12 <= len(data) and len(notes) < 100_000:
            namesz, descsz, ntype = struct.unpack_from("<III", data, at)
            name = data[at + 12: at + 12 + namesz].rstrip(b"\0").decode("latin-1")
            desc_at = at + 12 + ((namesz + 3) & ~3)
            notes.append((name, ntype, data[desc_at: desc_at + min(descsz, 4096)]))
            at = desc_at + ((descsz + 3) & ~3)
            if namesz == 0 and descsz == 0:
                break
    return notes
