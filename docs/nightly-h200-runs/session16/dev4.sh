# session 16 call 3 (two H200s): the perf profile with the bound floor + bytes/bandwidth, on the shipped kernels,
# as two complete half-scale runs side by side (one per GPU; one full run compiles for ~650 s, past a call's limit):
# GPU 0 seed 1, GPU 1 seed 2, 12 cases each; then, on GPU 1, every perf regression replayed.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
run_perf() {  # gpu seed
  CUDA_VISIBLE_DEVICES=$1 WY_ASCEND_FUZZ_SCALE=0.5 WY_ASCEND_HYPOTHESIS_DB=/tmp/hdb$2 timeout -s TERM 470 \
    python3 -m pytest fuzz/test_fuzz.py --profile perf --backend cuda --hypothesis-seed=$2 -p no:xdist \
    -p no:cacheprovider -q -W ignore --fuzz-report /tmp/perf-s$2.json > $OUT/perf-s$2.log 2>&1
  echo "perf seed $2 rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/perf-s$2.log
  cp /tmp/perf-s$2.json $OUT/perf-s$2-report.json
}
run_perf 0 1 &
( run_perf 1 2
  CUDA_VISIBLE_DEVICES=1 timeout $(( 560 - ($(date +%s) - T0) )) python3 -m wy_ascend.cli replay regressions/perf-*.json \
    --backend cuda > $OUT/replay.log 2>&1
  echo "replay rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/replay.log ) &
wait
git -C . status --short 2>/dev/null | head
tar -cf $OUT/new-regressions.tar $(ls regressions/perf-*.json | grep -v -e 07b876f7e3f6 -e 5d5548424a25 -e d16759ef3d4b -e ec54d047b990 -e ed58fb69cb0f) 2>/dev/null
for s in 1 2; do grep -E "passed|failed|FAILED|regression file" $OUT/perf-s$s.log | head -8 | cut -c1-300; done
grep -E "^(PASS|FAIL|CRASH|TIMEOUT)|verdict|summary" -A12 $OUT/replay.log | tail -20 | cut -c1-200
