# session 15 call 1 (one H200): the committed narrow reproducer test, then findvar.py (variants of the perf find).
export PYTHONUNBUFFERED=1
T0=$(date +%s)
cp scratch_dev/commit $OUT/commit
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
mkdir -p scratch_dev/tree/scratch_dev/s15 && cp scratch_dev/s15/findvar.py scratch_dev/tree/scratch_dev/s15/
cd scratch_dev/tree
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
WY_ASCEND_BACKEND=cuda timeout 200 python3 -m pytest tests/test_triton_narrow_repro.py -rxXs -p no:cacheprovider -q -W ignore > $OUT/narrow-repro.log 2>&1
echo "narrow-repro rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/narrow-repro.log
timeout 380 python3 scratch_dev/s15/findvar.py > $OUT/findvar.jsonl 2> $OUT/findvar.err
echo "findvar rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/findvar.jsonl
tail -15 $OUT/narrow-repro.log | cut -c1-250
cut -c1-260 $OUT/findvar.jsonl
tail -4 $OUT/findvar.err
