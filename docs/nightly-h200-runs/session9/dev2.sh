# session 9 call 2: fwd/bwd variants (eviction hints, varlen span table, fused loops) vs fla-core (GPU 0);
# the ptxas deadline device test with its logging fake ptxas (GPU 1)
export PYTHONUNBUFFERED=1
T0=$(date +%s)
pip install --no-index --no-deps --target /tmp/site scratch_dev/whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/src:$PWD:/tmp/site
( CUDA_VISIBLE_DEVICES=1 timeout 250 python3 -m pytest tests/test_ptxas_deadline.py -p no:cacheprovider -q -W ignore > $OUT/ptxas.log 2>&1; echo "ptxas rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/ptxas.log ) &
CUDA_VISIBLE_DEVICES=0 timeout 270 python3 scratch_dev/varbench.py base,ev,ev_cs,spans,spans_ev,fused_spans fwd > $OUT/fwd.log 2>&1
echo "fwd rc=$? at $(( $(date +%s) - T0 )) s"
CUDA_VISIBLE_DEVICES=0 timeout $(( 540 - ($(date +%s) - T0) )) python3 scratch_dev/varbench.py base,spans,bev,spans_bev bwd > $OUT/bwd.log 2>&1
echo "bwd rc=$? at $(( $(date +%s) - T0 )) s"
wait
tail -25 $OUT/ptxas.log | cut -c1-400
python3 - <<'PY'
import json, os
for f in ("fwd.log", "bwd.log"):
    for line in open(os.path.join(os.environ["OUT"], f)):
        if line.startswith("{"):
            r = json.loads(line)
            if "variant" in r:
                print(f"{r['shape']:32s} {r['op']} {r['variant']:18s} {r['ms']:.4f} fla {r['fla_ms']:.4f} ratio {r['ratio']:.3f} first {r['first_s']:.1f} diff {r['maxdiff_vs_first']:.3g}")
            else:
                print(r)
        elif "Error" in line or "error" in line:
            print(f, line.rstrip()[:300])
PY
