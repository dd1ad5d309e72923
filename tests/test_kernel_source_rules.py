"""Ascend traps that no run off the NPU can show, checked on the kernels' source (docs/design.md section 3).

The interpreter emulates what it can (interpreter.py: the clobbering dot, out-of-range DMA, races,
folded program ids) and the lowering gate compiles every specialization through triton-ascend's
frontend; these are neither a wrong number on the CPU nor a compile error (the last one not even on the
NPU), so they are rules of the source, read from its syntax tree:

* no block pointers (``tl.make_block_ptr``): their offsets must be 32-bit on Ascend and upstream
  triton 3.9 removed them;
* gate ratios in one form: ``exp2(a)[:, None] / exp2(b)[None, :]`` and ``exp2(a[:, None] - b[None, :])``
  give materially different results on Ascend, so no product or quotient of two exp2 values (the
  kernels exponentiate the difference);
* no runtime ``if`` choosing between two load paths: Ascend keeps both in the unified buffer (the UB
  model counts one); a load path chosen by a constexpr compiles to one;
* every masked ``tl.load`` names ``other``: triton-ascend's ``tl.load`` fills the masked-off lanes with
  zeros where it is not named (``care_padding=True``, its default), so the interpreter (its frontend)
  and the NPU read zeros there, while upstream Triton, the cuda backend's, leaves them undefined: a
  kernel that uses those lanes passes on the CPU and the NPU and reads garbage on a GPU.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src" / "wy_ascend" / "kernels.py"


def _jit_functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    def jitted(fn: ast.FunctionDef) -> bool:
        return any("jit" in ast.unparse(d) for d in fn.decorator_list)

    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and jitted(n)}


def _constexpr_names(tree: ast.Module, fn: ast.FunctionDef) -> set[str]:
    """Names that are compile-time in ``fn``: its tl.constexpr parameters, its locals annotated tl.constexpr
    (``X: tl.constexpr = ...``, which Triton folds) and the module's tl.constexpr globals."""
    params = {a.arg for a in fn.args.args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}
    local = {n.target.id for n in ast.walk(fn) if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
             and "constexpr" in ast.unparse(n.annotation)}
    module = {t.id for n in tree.body if isinstance(n, ast.Assign) and "constexpr" in ast.unparse(n.value)
              for t in n.targets if isinstance(t, ast.Name)}
    return params | local | module


def _is_call_to(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == name


def _exp2_operand(node: ast.AST, exp2_names: set[str]) -> bool:
    """An exp2 value: a tl.exp2 call or a name bound to one, possibly indexed ([:, None])."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return _is_call_to(node, "exp2") or (isinstance(node, ast.Name) and node.id in exp2_names)


def _exp2_ratios(fn: ast.FunctionDef) -> list[str]:
    exp2_names = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) and _is_call_to(n.value, "exp2")
                  for t in n.targets if isinstance(t, ast.Name)}
    return [ast.unparse(n) for n in ast.walk(fn) if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mult, ast.Div))
            and _exp2_operand(n.left, exp2_names) and _exp2_operand(n.right, exp2_names)]


def _loading(functions: dict[str, ast.FunctionDef]) -> set[str]:
    """The jit functions that load global memory, themselves or through a jit helper they call."""
    calls = {name: {ast.unparse(n.func) for n in ast.walk(fn) if isinstance(n, ast.Call)} for name, fn in functions.items()}
    loading = {name for name, called in calls.items() if "tl.load" in called}
    while True:
        more = {name for name, called in calls.items() if called & loading} - loading
        if not more:
            return loading
        loading |= more


def _loads(stmts: list[ast.stmt], loading: set[str]) -> bool:
    return any(isinstance(n, ast.Call) and ast.unparse(n.func) in loading | {"tl.load"}
               for s in stmts for n in ast.walk(s))


def _runtime_branches_between_loads(tree: ast.Module, functions: dict[str, ast.FunctionDef]) -> list[str]:
    loading = _loading(functions)
    found = []
    for name, fn in functions.items():
        constexprs = _constexpr_names(tree, fn)
        for n in ast.walk(fn):
            if not isinstance(n, ast.If):
                continue
            runtime = any(isinstance(x, ast.Name) and x.id not in constexprs for x in ast.walk(n.test))
            if runtime and _loads(n.body, loading) and _loads(n.orelse, loading):
                found.append(f"{name}:{n.lineno}: if {ast.unparse(n.test)}")
    return found


def _masked_loads_without_other(fn: ast.FunctionDef) -> list[str]:
    """``tl.load`` calls given a mask (keyword or second argument) but no ``other`` (keyword or third)."""
    def named(call: ast.Call, arg: str, position: int) -> bool:
        return len(call.args) > position or any(k.arg == arg for k in call.keywords)

    return [f"{fn.name}:{n.lineno}" for n in ast.walk(fn) if isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.load"
            and named(n, "mask", 1) and not named(n, "other", 2)]


def _violations(source: str) -> dict[str, list[str]]:
    tree = ast.parse(source)
    functions = _jit_functions(tree)
    return {
        "block pointers": [f"{fn.name}:{n.lineno}" for fn in functions.values() for n in ast.walk(fn)
                           if isinstance(n, ast.Call) and _is_call_to(n, "make_block_ptr")],
        "exp2 ratios": [f"{fn.name}: {r}" for fn in functions.values() for r in _exp2_ratios(fn)],
        "runtime branches between loads": _runtime_branches_between_loads(tree, functions),
        "masked loads without other": [hit for fn in functions.values() for hit in _masked_loads_without_other(fn)],
    }


def test_the_kernels_keep_the_ascend_source_rules() -> None:
    source = SOURCE.read_text()
    assert len(_jit_functions(ast.parse(source))) >= 10  # the rules read the kernels, not an empty module
    assert _violations(source) == {"block pointers": [], "exp2 ratios": [], "runtime branches between loads": [],
                                   "masked loads without other": []}


RULE_BREAKERS = {
    "block pointers": '''
@triton.jit
def f(x, T):
    p = tl.make_block_ptr(x, (T,), (1,), (0,), (16,), (0,))
    return tl.load(p)
''',
    "exp2 ratios": '''
@triton.jit
def f(g, m):
    b_eg = tl.exp2(g)
    return tl.where(m, b_eg[:, None] / b_eg[None, :], 0.0)
''',
    "runtime branches between loads": '''
@triton.jit
def load_one(p):
    return tl.load(p)


@triton.jit
def f(p, q, j, FLAG: tl.constexpr):
    BOTH: tl.constexpr = FLAG and True
    if BOTH:
        x = tl.load(p)
    else:
        x = tl.load(q)
    if j > 0:
        x += load_one(p)
    else:
        x += tl.load(q)
    return x
''',
    "masked loads without other": '''
@triton.jit
def f(p, n, N: tl.constexpr):
    o = tl.arange(0, N)
    return tl.load(p + o, mask=o < n) + tl.load(p + o, o < n, 0.0)
''',
}


@pytest.mark.parametrize("rule", RULE_BREAKERS)
def test_each_rule_names_what_breaks_it(rule: str) -> None:
    """Each rule finds its own trap, and only there: a constexpr branch between loads, the kernels'
    exp2 of a difference and a runtime branch with one load path pass."""
    found = _violations(RULE_BREAKERS[rule])
    assert [name for name, hits in found.items() if hits] == [rule], found
    if rule == "runtime branches between loads":
        assert found[rule] == ["f:14: if j > 0"]  # the branch on a constexpr local passes
    if rule == "masked loads without other":
        assert found[rule] == ["f:5"]  # once: the positional other counts
    allowed = '''
@triton.jit
def f(g, m, p, j):
    x = tl.exp2(tl.where(m, g[:, None] - g[None, :], 0.0)) * (g * tl.exp2(g))[:, None]
    if j > 0:
        x += tl.load(p) + tl.load(p, mask=m, other=0.0)
    return x
'''
    assert not _exp2_ratios(ast.parse(allowed).body[0])  # type: ignore[arg-type]
    assert not any(_violations(allowed).values())
