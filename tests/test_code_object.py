"""AMDGPU code objects built by scripts/build_code_objects.sh with clang-19 (committed binaries)."""

import shutil
import subprocess

import pytest

from faultkit.ingest.code_object import (bundle_entries, code_objects_in, extract_uri, read_code_object, target_id)

from .conftest import ROOT

DATA = ROOT / "tests/data/code_objects"
SOURCE = (DATA / "kernels.cl").read_text().splitlines()
WAVE = {"gfx1100": 32, "gfx942": 64, "gfx90a": 64}


def _line_of(text):
    return next(i + 1 for i, line in enumerate(SOURCE) if text in line)


@pytest.mark.parametrize("gfx", sorted(WAVE))
def test_kernels_metadata_and_lines(gfx):
    co = read_code_object((DATA / f"kernels-{gfx}.co").read_bytes(), gfx)
    assert co.target.split(":")[0] == gfx and not co.problems
    assert [k.name for k in co.kernels] == ["scale", "oob_store"]
    scale, oob = co.kernels
    assert scale.descriptor is not None and oob.descriptor == scale.descriptor + 64   # 64-byte kernel descriptors
    assert [(a.name, a.offset, a.size, a.kind, a.address_space) for a in scale.args] == [
        ("out", 0, 8, "global_buffer", "global"), ("in", 8, 8, "global_buffer", "global"), ("a", 16, 4, "by_value", None)]
    assert scale.wavefront_size == WAVE[gfx] and scale.lds_bytes == 0
    base = 0x7FFFF5E00000
    r = co.resolve(base + oob.address + 4, load_base=base)
    assert (r.kernel, r.offset) == ("oob_store", 4) and r.file == "kernels.cl"
    assert _line_of("__kernel void oob_store") <= r.line <= _line_of("p[i + n]")
    last = co.resolve(base + oob.address + oob.size - 4, text_start=base + co.text_address)
    assert last.kernel == "oob_store" and last.line == _line_of("p[i + n]") + 1   # the closing brace: s_endpgm
    assert co.resolve(base + 0x10, load_base=base) is None      # not inside any function


def test_target_id_features():
    assert target_id(0x53F) == "gfx90a"                  # xnack and sramecc 'any' are left out
    assert target_id(0xB3F) == "gfx90a:sramecc-:xnack+"
    assert target_id(0x4C) == "gfx942"
    assert target_id(0xEE).startswith("unknown-mach-0xee")


def test_bundle_and_host_executable_extraction():
    bundle = (DATA / "kernels.hipfb").read_bytes()
    entries = bundle_entries(bundle)
    assert [e.triple for e in entries][0].startswith("host-x86_64")
    assert [e.triple.rsplit("-", 1)[-1] for e in entries][1:] == ["gfx1100", "gfx942", "gfx90a"]
    host = (DATA / "host-with-fatbin").read_bytes()
    found, problems = code_objects_in(host, "host")
    assert not problems and sorted(c.target.split(":")[0] for _, c in found) == ["gfx1100", "gfx90a", "gfx942"]
    # The URI rocgdb prints (file://host#offset=N&size=N) names exactly one of them.
    name = next(n for n, c in found if c.target.startswith("gfx942"))
    offset, size = (int(x) for x in name.split("#offset=")[1].split(" ")[0].split("&size="))
    co = read_code_object(extract_uri(host, offset, size))
    assert co.target.startswith("gfx942") and co.kernel("oob_store")


def test_not_and_broken_code_objects():
    assert read_code_object(b"not an elf at all") is None
    assert read_code_object((ROOT / "tests/data/code_objects/host-with-fatbin").read_bytes()[:64 * 1024]) is None
    cut = (DATA / "kernels-gfx1100.co").read_bytes()[:900]
    co = read_code_object(cut, "cut.co")
    assert co is not None and co.problems and "cut.co" in str(co.problems[0])
    found, problems = code_objects_in(b"xx" + b"__CLANG_OFFLOAD_BUNDLE__" + b"\x05", "cutbundle")
    assert found == [] and "cut" in problems[0].message


@pytest.mark.skipif(not shutil.which("/usr/lib/llvm-19/bin/clang"),
                    reason="clang-19 not installed: the committed objects are tested above; apt-get install clang-19 "
                           "lld-19 llvm-19 to test the rebuild")
def test_build_script_reproduces_the_objects(tmp_path):
    shutil.copy(DATA / "kernels.cl", tmp_path / "kernels.cl")
    subprocess.run([str(ROOT / "scripts/build_code_objects.sh"), str(tmp_path)], check=True, capture_output=True)
    for gfx in WAVE:
        fresh = read_code_object((tmp_path / f"kernels-{gfx}.co").read_bytes())
        kept = read_code_object((DATA / f"kernels-{gfx}.co").read_bytes())
        assert [k.name for k in fresh.kernels] == [k.name for k in kept.kernels]
        assert fresh.target == kept.target
