# On the H200 (from the repo root, with py-spy wheels in .whl/): bash scripts/hang_h200/run.sh
# 1) a process whose GPU spins under torch.cuda.synchronize; 2) three gloo ranks, rank 1 skips the
# 4th all_reduce and spins its GPU: faultkit dump on both, flight records of every rank, into $OUT.
set -x
export TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_FR_BUFFER_SIZE=2000 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
W=$OUT/w; mkdir -p $W
python3 -c 'import torch; print(torch.__version__, torch.cuda.is_available())'
py-spy --version
# 1) one process whose GPU spins, its host thread in torch.cuda.synchronize
python3 scripts/hang_h200/spin.py > $W/spin.log 2>&1 & S=$!
sleep 8
python3 -m faultkit.cli dump --pid $S --interval 3s -o $W/spin_stacks > $W/dump_spin.txt 2>&1; echo "rc=$?" >> $W/dump_spin.txt
python3 -m faultkit.cli dump --pid $S --samples 1 --format json > $W/dump_spin.json 2>&1
kill $S
# 2) three gloo ranks: rank 1 skips an all_reduce and spins its GPU
python3 scripts/hang_h200/ranks.py $W > $W/ranks.log 2>&1 & L=$!
for i in $(seq 60); do [ -f $W/ready.0 ] && [ -f $W/ready.1 ] && [ -f $W/ready.2 ] && break; sleep 1; done
sleep 3
python3 -m faultkit.cli dump --pid $L --interval 3s -o $W/rank_stacks > $W/dump_ranks.txt 2>&1; echo "rc=$?" >> $W/dump_ranks.txt
python3 -m faultkit.cli dump --pid $L --format json --interval 2s > $W/dump_ranks.json 2>&1
sleep 25
ls -la $W/fr
python3 -m faultkit.cli dump --pid $L --samples 1 > $W/dump_ranks_after.txt 2>&1
cd $OUT && tar czf hang_h200.tgz w && rm -rf w
ls -la $OUT
