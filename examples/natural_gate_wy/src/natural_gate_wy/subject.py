"""natural_gate_wy declared for wy_ascend's fuzz suite (wy_ascend.subjects; docs/subjects.md of wy_ascend).

``pyproject.toml`` registers ``SUBJECT`` as the entry point ``natural-gate-wy`` of group ``wy_ascend.subjects``,
so ``wy-ascend fuzz --subject natural-gate-wy`` finds it once this package is installed; without installing,
``--subject natural_gate_wy.subject:SUBJECT`` loads it by import path.
"""

from wy_ascend.subjects import HOST, Calling, Claims, Subject

SUBJECT = Subject(
    name="natural-gate-wy",
    forward="natural_gate_wy.kernel:wy_forward",  # imported when first called
    backward=None,  # forward only
    backends=("cpu",),  # plain torch on the host
    calling=Calling(
        forward=("k", "v", "g", "A", "beta"),  # its positional order: g before A, beta last
        backward=(),
        keywords={"cu_seqlens": "offsets", "chunk_indices": "chunks"},  # keyword-only, its own names
        gate_units="ln",  # exp(g): the suite passes g * ln 2 (in float32)
        gate_layout="head",  # beta and g [B, H, T]
        g_dtype="float32",
        A_dtype="float32",
        chunk_indices="prebuilt",  # always passed with a packed batch, made by its own function
        prepare_chunk_indices="natural_gate_wy.kernel:prepare_chunks",
    ),
    claims=Claims(
        dtypes=("float32", "bfloat16"),
        chunk_sizes=(16, 64),
        dims=(16, 128),
        gate_dtypes=False,  # beta in k's dtype (g: float32 always, above)
        validates=False,  # it checks no argument: bad_input does not run
        knobs=(),  # no launch knobs
    ),
    target=HOST,  # no Triton kernel: none of the interpreter's device rules, no index-width audit
    known=(),  # a defect marked known: Known("0.1.0", "<property>-<hash>.json", "<cases it covers>")
    version="0.1.0",  # known marks name the version they were found in
    distribution="natural-gate-wy",  # the package a replay elsewhere tells to install
    about="an example forward-only WY step in plain torch (natural-log, head-major gates; float32 A)",
)
