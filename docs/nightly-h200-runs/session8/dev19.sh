# session 8 call 2: the grid + headline from one run of the shipped code, then the perf profile
export PYTHONUNBUFFERED=1
T0=$(date +%s)
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
git log --oneline -1 2>/dev/null; python3 -c "import triton, torch; print(triton.__version__, torch.__version__)"
python3 benchmarks/compare_peer.py --all --warm-jobs 12 --rep 100 --json $OUT/all.json > $OUT/all.log 2>&1
echo "compare_peer rc=$? at $(( $(date +%s) - T0 )) s"; tail -45 $OUT/all.log
LEFT=$(( 575 - ($(date +%s) - T0) ))
echo "perf profile: $LEFT s"
WY_ASCEND_FUZZ_SCALE=0.25 timeout -s TERM $LEFT python3 -m pytest fuzz/test_fuzz.py --profile perf --backend cuda \
  -p no:xdist -p no:cacheprovider -x -q -W ignore --fuzz-report $OUT/perf-report.json > $OUT/perf.log 2>&1
echo "perf rc=$?"; tail -30 $OUT/perf.log; ls regressions/ | grep perf; cp regressions/perf-* $OUT/ 2>/dev/null; true
