# session 14 call 3 (one H200): all 34 benchmark shapes (headline + no-cliff grid) of the shipped code (tree: HEAD,
# scratch_dev/commit) against fla-core 0.6.0, autotuning on for both; the JSON docs/benchmarks.md is generated from.
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
timeout 575 python3 benchmarks/compare_peer.py --all --warm-jobs 14 --rep 100 --rounds 3 --json $OUT/all.json > $OUT/all.log 2>&1
echo "compare_peer rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/all.log
grep -E "copy bandwidth|warm-up" $OUT/all.log
tail -72 $OUT/all.log | cut -c1-200
