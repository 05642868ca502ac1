# From the repo root: sh scripts/nccl_timeout/run.sh [one|two]. `one` (one GPU, nvidia-h200): one NCCL rank whose
# all_reduce is queued behind a spinning kernel, so its watchdog times out; `two` (nvidia-h200-x2): two ranks,
# rank 1 skips an all_reduce. Both with the flight recorder on and off, then faultkit's triage of each log.
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 3
fi
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
python3 -c 'import torch; print(torch.__version__, torch.cuda.device_count(), torch.cuda.nccl.version())'
for fr in on off; do
    W=$OUT/$fr; mkdir -p $W/fr
    if [ $fr = on ]; then
        export TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_NCCL_DEBUG_INFO_TEMP_FILE=$W/fr/nccl_trace_rank_
    else
        export TORCH_NCCL_TRACE_BUFFER_SIZE=0; unset TORCH_NCCL_DUMP_ON_TIMEOUT TORCH_NCCL_DEBUG_INFO_TEMP_FILE
    fi
    if [ "${1:-one}" = two ]; then
        timeout 150 python3 scripts/nccl_timeout/ranks.py $W > $W/spawn.log 2>&1; echo "ranks rc=$?" >> $W/spawn.log
    else
        timeout 150 python3 scripts/nccl_timeout/one_gpu.py $W > $W/spawn.log 2>&1; echo "one rc=$?" >> $W/spawn.log
        : > $W/rank1.log
    fi
    ls -la $W $W/fr
    for r in 0 1; do
        [ -s $W/rank$r.log ] || continue
        python3 -m faultkit.cli triage $W/rank$r.log -f json > $W/triage_rank$r.json 2>$W/triage_rank$r.err
        python3 -m faultkit.cli triage $W/rank$r.log > $W/triage_rank$r.md 2>>$W/triage_rank$r.err
    done
    python3 -m faultkit.cli triage $W/rank0.log $W/rank1.log > $W/triage_both.md 2>&1
    [ $fr = on ] && python3 -m faultkit.cli triage $W/rank0.log $W/rank1.log $W/fr > $W/triage_with_fr.md 2>&1
done
cd $OUT && tar czf nccl_timeout.tgz on off && ls -la $OUT
