# session 7 call 1: issue-13 variants (x13.py) on one H200
export PYTHONUNBUFFERED=1 WY_ASCEND_AUTOTUNE=0
R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site scratch_dev/whl/*.whl
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
H=$R/scratch_dev/head
mk() { rm -rf /tmp/v_$1; mkdir -p /tmp/v_$1; cp -r $H/src /tmp/v_$1/; }
mk head
mk s1; sed -i 's/for i_\([kv]\) in range(N\([KV]\)):/for i_\1 in tl.range(0, N\2, num_stages=1):/' /tmp/v_s1/src/wy_ascend/kernels.py
mk s1m64; cp /tmp/v_s1/src/wy_ascend/kernels.py /tmp/v_s1m64/src/wy_ascend/kernels.py
sed -i 's/tile = max(MIN_TILE, min(next_power_of_2(dim), tile_cap))/tile = max(64, min(next_power_of_2(dim), tile_cap))/' /tmp/v_s1m64/src/wy_ascend/planning.py
grep -c "num_stages=1" /tmp/v_s1/src/wy_ascend/kernels.py; grep -n "tile = max(64" /tmp/v_s1m64/src/wy_ascend/planning.py
run() {  # label srcdir lowp shapes timeout
  START=$(date +%s)
  WY_ASCEND_LOWP=$3 PYTHONPATH=$2/src:$H:/tmp/site timeout $5 python3 $R/scratch_dev/x13.py $1 $4 >> $OUT/x13.log 2>&1
  echo "$1 rc=$? wall=$(( $(date +%s) - START )) s" >> $OUT/x13.log
}
run s1m64-multi /tmp/v_s1m64 multi-tile K64V32,K48V80,K16,K192V48 140
run head-multi /tmp/v_head multi-tile K256 70
run head-default /tmp/v_head one-tile head_fixed,head_grouped,head_varlen 90
run s1-multi /tmp/v_s1 multi-tile head_fixed,head_grouped,head_varlen,K256,K128V256,K192V48 220
cat $OUT/x13.log | cut -c1-700
