# session 12 call 2 (one H200): the backward per autotune config with register caps (regsweep.py), then the perf
# regression files replayed with register-capped configs added to the search (replaycfg.py).
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
cp scratch_dev/s12/regsweep.py scratch_dev/s12/replaycfg.py scratch_dev/tree/
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
timeout 330 python3 regsweep.py > $OUT/regsweep.log 2>&1
echo "regsweep rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/regsweep.log
L=$(( 570 - ($(date +%s) - T0) ))
timeout $L python3 replaycfg.py regressions/perf-d16759ef3d4b.json regressions/perf-5d5548424a25.json regressions/perf-ed58fb69cb0f.json > $OUT/replay.log 2>&1
echo "replay rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/replay.log
grep -E '^\{' $OUT/regsweep.log | cut -c1-900
grep -vE "^\s*\.|^\s*//|^\s*$" $OUT/replay.log | tail -40 | cut -c1-300
