# session 10 call 1 (one H200): all 34 shapes of the shipped code against fla-core, with each row's
# fraction of the measured copy bandwidth; then every regression file replayed on cuda.
# Runs from a `git archive` of the commit in scratch_dev/tree (scratch_dev/commit names it).
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
python3 benchmarks/compare_peer.py --all --warm-jobs 14 --rep 100 --rounds 3 --json $OUT/all.json > $OUT/all.log 2>&1
echo "compare_peer rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/all.log
WY_ASCEND_BACKEND=cuda timeout $(( 575 - ($(date +%s) - T0) )) python3 -m pytest fuzz/test_regressions.py \
  --backend cuda -p no:cacheprovider -p no:xdist -q -W ignore -rA > $OUT/regress.log 2>&1
echo "regress rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/regress.log
grep -E "PASSED|FAILED|SKIPPED|ERROR" $OUT/regress.log | cut -c1-250
grep -E "copy bandwidth|warm-up" $OUT/all.log
tail -72 $OUT/all.log
