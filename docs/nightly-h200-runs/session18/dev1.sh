# session 18 call 1 (one H200): all 34 benchmark shapes of the shipped code against fla-core 0.6.0 in one run
# (the JSON docs/benchmarks.md is generated from), with the autotuner timing a config by 20 ms graph replays.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
timeout $(( 588 - ($(date +%s) - T0) )) python3 benchmarks/compare_peer.py --all --warm-jobs 14 --rep 100 --rounds 3 --json $OUT/all.json > $OUT/all.log 2>&1
echo "compare_peer rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/all.log
grep -E "copy bandwidth|warm-up" $OUT/all.log | cut -c1-400
tail -75 $OUT/all.log | cut -c1-200
