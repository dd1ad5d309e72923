"""Write forward variants of src/wy_ascend/kernels.py into scratch_dev/var_<name>.py (text edits, asserted)."""
import pathlib
root = pathlib.Path(__file__).resolve().parents[2]
src = (root / "src/wy_ascend/kernels.py").read_text()
LOOP = "        for i in tl.range(0, NK if NK >= NV else NV, num_stages=1):"
assert src.count(LOOP) == 1
for stages in (2, 3):
    (root / f"scratch_dev/var_p{stages}.py").write_text(src.replace(LOOP, LOOP.replace("num_stages=1", f"num_stages={stages}")))
(root / "scratch_dev/var_base.py").write_text(src)
print("ok")
