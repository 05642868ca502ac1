#!/bin/bash
# Capture every compute-sanitizer report kind faultkit reads, on a real GPU (run on the device
# machine: `bash scripts/live_sanitizer_formats.sh`, outputs in $OUT). The program is ours
# (scripts/sanitizer_formats.cu); the text is the tools' own, unedited.
set -u
O=${OUT:-/tmp/sanitizer_formats}; mkdir -p "$O"
B=/tmp/sanitizer_formats_bin
nvcc -g -lineinfo -o $B scripts/sanitizer_formats.cu 2>&1 | tail -3
{ compute-sanitizer --version | tail -1; nvidia-smi -L; } > "$O/versions.txt" 2>&1
cap() { local name=$1; shift; timeout 120 "$@" > "$O/$name.txt" 2>&1; echo "rc=$?" >> "$O/$name.txt"; }
cap racecheck compute-sanitizer --tool racecheck $B race
cap racecheck_hazard compute-sanitizer --tool racecheck --racecheck-report hazard $B race
cap racecheck_folded compute-sanitizer --tool racecheck $B race_folded
cap racecheck_helper compute-sanitizer --tool racecheck $B race_helper
cap initcheck compute-sanitizer --tool initcheck $B uninit
cap synccheck compute-sanitizer --tool synccheck $B barrier
cap memcheck_misaligned_badpc bash -c "compute-sanitizer --tool memcheck $B misaligned; compute-sanitizer --tool memcheck $B badpc"
# a device function's access: its Device Frame lines (with the host backtrace after them) and cut (device only)
cap memcheck_helper bash -c "compute-sanitizer --tool memcheck $B helper; compute-sanitizer --tool memcheck --show-backtrace device $B helper"
# the same store in an inlined helper: what the `at` line names, and whether a Device Frame line follows
cap memcheck_inline_helper compute-sanitizer --tool memcheck $B inline_helper
# why the first `race` kernel raced on nothing: the shared loads and stores the compiler kept
cap sass cuobjdump -sass $B
cap assert_and_leak bash -c "$B assert; compute-sanitizer --tool memcheck $B assert; compute-sanitizer --tool memcheck --leak-check full $B leak"
ls -la "$O"
