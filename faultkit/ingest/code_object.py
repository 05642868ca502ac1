"""AMDGPU code objects: kernels, their descriptors and metadata, and PC to kernel+line resolution.

A faulting wave's PC is an absolute address in a code object loaded at some base. rocgdb's
`info sharedlibrary` names the object by URI (`file://path#offset=N&size=N` inside a host
binary or offload bundle, `memory://pid#offset=..` inside process memory) and prints the loaded
text range; the object itself gives the kernel symbol containing the PC and, with DWARF, the
source line.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgpack

from ..model import CodeObject, Kernel, KernelArg, Problem

if TYPE_CHECKING:
    from elftools.elf.elffile import ELFFile

EM_AMDGPU = 224
NT_AMDGPU_METADATA = 32
EF_AMDGPU_MACH = 0xFF
BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
COMPRESSED_BUNDLE_MAGIC = b"CCOB"

# EF_AMDGPU_MACH_* values: checked against clang-19 output for every target it builds; the
# rest (gfx950, gfx1153, the generic targets) are LLVM's ELF.h values.
MACH = {
    0x20: "gfx600", 0x21: "gfx601", 0x22: "gfx700", 0x23: "gfx701", 0x24: "gfx702", 0x25: "gfx703", 0x26: "gfx704",
    0x28: "gfx801", 0x29: "gfx802", 0x2a: "gfx803", 0x2b: "gfx810", 0x2c: "gfx900", 0x2d: "gfx902", 0x2e: "gfx904",
    0x2f: "gfx906", 0x30: "gfx908", 0x31: "gfx909", 0x32: "gfx90c", 0x33: "gfx1010", 0x34: "gfx1011",
    0x35: "gfx1012", 0x36: "gfx1030", 0x37: "gfx1031", 0x38: "gfx1032", 0x39: "gfx1033", 0x3a: "gfx602",
    0x3b: "gfx705", 0x3c: "gfx805", 0x3d: "gfx1035", 0x3e: "gfx1034", 0x3f: "gfx90a", 0x40: "gfx940",
    0x41: "gfx1100", 0x42: "gfx1013", 0x43: "gfx1150", 0x44: "gfx1103", 0x45: "gfx1036", 0x46: "gfx1101",
    0x47: "gfx1102", 0x48: "gfx1200", 0x4a: "gfx1151", 0x4b: "gfx941", 0x4c: "gfx942", 0x4e: "gfx1201",
    0x4f: "gfx950", 0x51: "gfx9-generic", 0x52: "gfx10-1-generic", 0x53: "gfx10-3-generic", 0x54: "gfx11-generic",
    0x55: "gfx1152", 0x58: "gfx1153", 0x59: "gfx12-generic", 0x5f: "gfx9-4-generic",
}
XNACK = {0x100: "xnack*", 0x200: "xnack-", 0x300: "xnack+"}      # EF_AMDGPU_FEATURE_XNACK_V4
SRAMECC = {0x400: "sramecc*", 0x800: "sramecc-", 0xC00: "sramecc+"}


def target_id(e_flags: int) -> str:
    name = MACH.get(e_flags & EF_AMDGPU_MACH, f"unknown-mach-0x{e_flags & EF_AMDGPU_MACH:x}")
    feats = [f for f in (SRAMECC.get(e_flags & 0xC00), XNACK.get(e_flags & 0x300)) if f and not f.endswith("*")]
    return ":".join([name, *feats])


def read_code_object(data: bytes, name: str = "<code object>") -> CodeObject | None:
    """Parse one AMDGPU ELF. Returns None (with no exception) when `data` is not one; a damaged
    one comes back with its problems and whatever could be read."""
    if data[:4] != b"\x7fELF":
        return None
    co = None
    try:
        from elftools.elf.elffile import ELFFile    # only when there is a code object to read
        elf = ELFFile(io.BytesIO(data))
        if elf["e_machine"] not in ("EM_AMDGPU", EM_AMDGPU):
            return None
        co = CodeObject(target_id(elf["e_flags"]))
        text = elf.get_section_by_name(".text")
        co.text_address = text["sh_addr"] if text is not None else None
        _symbols(elf, co)
        _metadata(elf, co, name)
        _lines(elf, co, name)
    except Exception as exc:  # noqa: BLE001 - pyelftools raises many types (OverflowError, TypeError...) on damaged ELF
        problem = Problem(name, f"not a readable AMDGPU ELF ({type(exc).__name__}: {exc})")
        if co is None:
            return CodeObject("unknown", problems=[problem])
        co.problems.append(problem)          # what was read before the damage is kept
    return co


def _symbols(elf: ELFFile, co: CodeObject) -> None:
    symtab = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
    if symtab is None:
        return
    descriptors = {}
    for sym in symtab.iter_symbols():
        kind = sym["st_info"]["type"]
        if kind == "STT_FUNC" and sym.name:
            co.functions.append((sym["st_value"], sym["st_size"], sym.name))
        elif kind == "STT_OBJECT" and sym.name.endswith(".kd"):
            descriptors[sym.name[:-3]] = sym["st_value"]
    co.functions.sort()
    co.kernels = [Kernel(n, a, s, descriptors[n]) for a, s, n in co.functions if n in descriptors]


def _metadata(elf: ELFFile, co: CodeObject, name: str) -> None:
    for section in elf.iter_sections():
        if section["sh_type"] != "SHT_NOTE":
            continue
        for note in section.iter_notes():
            if note["n_name"] != "AMDGPU" or note["n_type"] != NT_AMDGPU_METADATA:
                continue
            desc = note["n_desc"]
            try:
                meta = msgpack.unpackb(desc if isinstance(desc, bytes) else desc.encode("latin-1"), raw=False,
                                       strict_map_key=False)
            except (ValueError, msgpack.UnpackException) as exc:
                co.problems.append(Problem(name, f"AMDGPU metadata note unreadable ({exc})"))
                continue
            co.metadata = meta
            for km in meta.get("amdhsa.kernels", []):
                k = co.kernel(str(km.get(".symbol", "")).removesuffix(".kd")) or co.kernel(km.get(".name", ""))
                if k is None:
                    continue
                k.display_name = km.get(".name")
                k.lds_bytes = km.get(".group_segment_fixed_size")
                k.scratch_bytes = km.get(".private_segment_fixed_size")
                k.wavefront_size = km.get(".wavefront_size")
                k.sgprs, k.vgprs = km.get(".sgpr_count"), km.get(".vgpr_count")
                k.kernarg_bytes = km.get(".kernarg_segment_size")
                k.args = [KernelArg(a.get(".name"), a.get(".offset", 0), a.get(".size", 0), a.get(".value_kind"),
                                    a.get(".address_space"), a.get(".type_name")) for a in km.get(".args", [])]


def _lines(elf: ELFFile, co: CodeObject, name: str) -> None:
    if not elf.has_dwarf_info():
        return
    try:
        dwarf = elf.get_dwarf_info()
        rows = []
        for cu in dwarf.iter_CUs():
            prog = dwarf.line_program_for_CU(cu)
            if prog is None:
                continue
            header = prog.header
            files = header["file_entry"]
            base = 0 if header["version"] >= 5 else 1
            for entry in prog.get_entries():
                st = entry.state
                if st is None or st.end_sequence:
                    continue
                idx = st.file - base
                fname = files[idx].name.decode() if 0 <= idx < len(files) else "?"
                rows.append((st.address, fname, st.line))
        co.lines = sorted(rows)
    except Exception as exc:  # noqa: BLE001 - pyelftools raises many types on odd DWARF; lines are optional
        co.problems.append(Problem(name, f"DWARF line table unreadable ({type(exc).__name__}: {exc}); "
                                         f"kernels resolve without lines"))


# ---------------- finding code objects inside other files ----------------

@dataclass
class BundleEntry:
    """One code object inside an offload bundle: its target and where its bytes are."""
    triple: str                      # e.g. hipv4-amdgcn-amd-amdhsa--gfx1100
    offset: int
    size: int


def bundle_entries(data: bytes, at: int = 0) -> list[BundleEntry]:
    """Entries of an uncompressed clang offload bundle starting at `at`. Each entry is checked
    where it is read (its id and its bytes must lie in the file): a damaged count or entry ends
    the list there, the entries before it are kept; struct.error where not even one fits."""
    if data[at:at + len(BUNDLE_MAGIC)] != BUNDLE_MAGIC:
        return []
    pos = at + len(BUNDLE_MAGIC)
    (count,) = struct.unpack_from("<Q", data, pos)
    pos += 8
    out = []
    for _ in range(min(count, 4096)):
        if pos + 24 > len(data):
            break
        off, size, idlen = struct.unpack_from("<QQQ", data, pos)
        if idlen > 4096 or pos + 24 + idlen > len(data) or at + off + size > len(data):
            break
        pos += 24
        triple = data[pos:pos + idlen].decode("ascii", "replace")
        pos += idlen
        out.append(BundleEntry(triple, at + off, size))
    if len(out) < count and not out:
        raise struct.error("no entry fits in the file")
    return out


def code_objects_in(data: bytes, name: str = "<file>") -> tuple[list[tuple[str, CodeObject]], list[Problem]]:
    """Every AMDGPU code object in a file: itself, the entries of offload bundles in it (a
    host executable's .hip_fatbin holds one), or ELF images embedded elsewhere."""
    found: list[tuple[str, CodeObject]] = []
    problems: list[Problem] = []
    direct = read_code_object(data, name)
    if direct is not None and not direct.problems:
        return [(f"{name}", direct)], problems
    start = 0
    while (at := data.find(BUNDLE_MAGIC, start)) >= 0:
        start = at + len(BUNDLE_MAGIC)
        try:
            entries = bundle_entries(data, at)
        except struct.error:
            problems.append(Problem(name, f"offload bundle at 0x{at:x} is cut"))
            continue
        declared = struct.unpack_from("<Q", data, at + len(BUNDLE_MAGIC))[0]
        if declared != len(entries):
            problems.append(Problem(name, f"offload bundle at 0x{at:x} declares {declared:,} entries, "
                                          f"{len(entries)} lie in the file: those were read"))
        for e in entries:
            uri = f"{name}#offset={e.offset}&size={e.size}"
            co = read_code_object(data[e.offset:e.offset + e.size], uri)
            if co is not None and co.problems and not co.kernels:
                problems.extend(co.problems)
            elif co is not None:
                found.append((f"{uri} ({e.triple})", co))
    if COMPRESSED_BUNDLE_MAGIC in data and not found:
        problems.append(Problem(name, "compressed offload bundle (CCOB): decompress with clang-offload-bundler "
                                      "--unbundle first"))
    return found, problems


def extract_uri(uri_path_data: bytes, offset: int | None, size: int | None) -> bytes:
    """The bytes a `file://...#offset=N&size=N` URI names, given the file's bytes."""
    if offset is None:
        return uri_path_data
    return uri_path_data[offset:offset + size if size else None]
