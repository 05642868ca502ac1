# On the one-GPU H200 (repo root, faultkit's wheels in .whl/): bash scripts/tp2_one_gpu/run.sh
# Two TP ranks on one GPU over gloo with CUDA tensors: (1) rank 1 faults on a stale index,
# (2) rank 1 spins in a kernel; each captured by faultkit and triaged, into $OUT.
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
[ -d /tmp/site ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
W=$OUT/tp2; mkdir -p $W
python3 -m faultkit.cli capture -o $W/fault --timeout 150s -- python3 scripts/tp2_one_gpu/server.py --fault-after 10 > $W/fault-capture.txt 2>&1; echo "capture rc=$?" >> $W/fault-capture.txt
python3 -m faultkit.cli triage $W/fault -o $W/fault-triage.md; python3 -m faultkit.cli triage $W/fault --format json -o $W/fault-triage.json
python3 -m faultkit.cli capture -o $W/hang --hang-after 15s --timeout 150s -- python3 scripts/tp2_one_gpu/server.py --hang-after 10 > $W/hang-capture.txt 2>&1; echo "capture rc=$?" >> $W/hang-capture.txt
python3 -m faultkit.cli triage $W/hang -o $W/hang-triage.md; python3 -m faultkit.cli triage $W/hang --format json -o $W/hang-triage.json
grep -h "VERDICT\|^## \|level" $W/*-triage.md | head -40
cd $OUT && tar czf tp2_one_gpu.tgz tp2 && ls -la $OUT
