# session 12 call 1 (one H200): where the small grouped backward's time goes (small.py).
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
cp scratch_dev/s12/small.py scratch_dev/tree/
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
timeout 420 python3 small.py > $OUT/small.log 2>&1
echo "small rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/small.log
grep -v '^{' $OUT/small.log | tail -20
