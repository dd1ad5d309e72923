# session 7 call 4: is the nightly's launch_invariance find new? replay on 72adf44, HEAD, HEAD with pipelined-range tile loops
export PYTHONUNBUFFERED=1 WY_ASCEND_AUTOTUNE=0
H=$PWD/scratch_dev/head; P=$PWD/scratch_dev/prev; cd $H
F=regressions/launch_invariance-d8ee19042db9.json
rm -rf /tmp/vr; mkdir -p /tmp/vr; cp -r $H/src /tmp/vr/
sed -i 's/for i_\([kv]\) in tl.range(0, N\([KV]\), num_stages=1):/for i_\1 in range(N\2):/' /tmp/vr/src/wy_ascend/kernels.py; grep -c "in range(N" /tmp/vr/src/wy_ascend/kernels.py
for v in "head:$H/src" "prev:$P/src" "rangeloops:/tmp/vr/src"; do
  n=${v%%:*}; s=${v#*:}
  echo "== $n"; PYTHONPATH=$s:$H timeout 60 python3 -m wy_ascend.cli replay $F --backend cuda 2>&1 | tail -4
done
