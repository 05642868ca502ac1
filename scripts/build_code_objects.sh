#!/bin/sh
# Rebuild the AMDGPU code objects the tests read (tests/data/code_objects/).
# Needs Debian's clang-19 and lld-19 (no GPU, no ROCm): apt-get install clang-19 lld-19 llvm-19
set -eu
out=${1:-$(dirname "$0")/../tests/data/code_objects}
bin=/usr/lib/llvm-19/bin
mkdir -p "$out"
cd "$out"
out=$(pwd)
for gfx in gfx1100 gfx942 gfx90a; do
    "$bin/clang" --target=amdgcn-amd-amdhsa -mcpu=$gfx -nogpulib -g -O1 -x cl -cl-std=CL2.0 \
        -cl-kernel-arg-info kernels.cl -o kernels-$gfx.co
done
# A HIP-style fat binary: an offload bundle of the three objects (empty host entry), then a
# host executable carrying it in .hip_fatbin the way hipcc lays it out.
: > host-empty.o
"$bin/clang-offload-bundler" -type=o \
    -targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx1100,hipv4-amdgcn-amd-amdhsa--gfx942,hipv4-amdgcn-amd-amdhsa--gfx90a \
    -input=host-empty.o -input=kernels-gfx1100.co -input=kernels-gfx942.co -input=kernels-gfx90a.co \
    -output=kernels.hipfb
rm -f host-empty.o
printf 'int main(void) { return 0; }\n' > host.c
gcc -O0 -o host-with-fatbin host.c
"$bin/llvm-objcopy" --add-section .hip_fatbin=kernels.hipfb --set-section-flags .hip_fatbin=alloc,readonly \
    host-with-fatbin
rm -f host.c
ls -l "$out"
