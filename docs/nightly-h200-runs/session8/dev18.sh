# session 8 call 1: diagnosis of the small-K/V and K=256 gaps (device vs host time, variants vs fla)
export PYTHONUNBUFFERED=1 FLA_CACHE_RESULTS=0 TRITON_CACHE_DIR=/tmp/tc
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm --format=csv
S="fixed_B4_T4096_H4_K16_V16 fixed_B4_T4096_H4_K32_V32 fixed_B4_T4096_H4_K64_V64 fixed_B4_T4096_H4_K80_V80 fixed_B4_T4096_H4_K256_V256 varlen_T2048_N8_H2_HV8_K16_V16 grouped_B2_T2048_H4_HV8_K64 fixed_B8_T4096_H16_K128 grouped_B8_T4096_H8_HV32_K128"
t0=$(date +%s)
for s in $S; do DIAG_WARM=1 python3 scratch_dev/diag8.py $s > /tmp/warm-$s.log 2>&1 & done; wait
echo "warm $(( $(date +%s) - t0 )) s"; tail -n 3 /tmp/warm-*.log | grep -i error | head
python3 scratch_dev/diag8.py $S 2>&1 | tee $OUT/diag8.jsonl | grep -v '^{' | tail -20
echo "total $(( $(date +%s) - t0 )) s"
