# On a machine with 2 GPUs (nvidia-h200-x2), from the repo root: sh scripts/nccl_timeout/run.sh
# One rank's NCCL watchdog timeout as torch prints it today, with the flight recorder on and off,
# and faultkit's triage of each rank's log alone, both logs, and the logs with the flight records.
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
    timeout 150 python3 scripts/nccl_timeout/ranks.py $W > $W/spawn.log 2>&1; echo "ranks rc=$?" >> $W/spawn.log
    ls -la $W $W/fr
    for r in 0 1; do
        python3 -m faultkit.cli triage $W/rank$r.log -f json > $W/triage_rank$r.json 2>$W/triage_rank$r.err
        python3 -m faultkit.cli triage $W/rank$r.log > $W/triage_rank$r.md 2>>$W/triage_rank$r.err
    done
    python3 -m faultkit.cli triage $W/rank0.log $W/rank1.log > $W/triage_both.md 2>&1
    [ $fr = on ] && python3 -m faultkit.cli triage $W/rank0.log $W/rank1.log $W/fr > $W/triage_with_fr.md 2>&1
done
cd $OUT && tar czf nccl_timeout.tgz on off && ls -la $OUT
