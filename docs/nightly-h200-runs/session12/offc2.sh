cd /work/main
for args in "128 float32 0 0 16" "128 float32 0 0 32" "128 float32 0 0 8"; do
  s=$(date +%s); timeout 900 nice /work/venv-cuda/bin/python scratch_dev/s12/offc.py $args 2>&1 | tail -1; echo "[$args] exit at $(( $(date +%s) - s )) s"
done
