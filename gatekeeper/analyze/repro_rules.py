"""What a reproduction case may run: checked when the bundle is written and again inside repro.py.

A failed check's ``details`` come from the artifacts, which the code under test
(or a fork) wrote. repro.py must never call what they name, so an op is either
an ATen operator (resolved only through ``torch.ops.aten``) or one of a fixed
table of public torch functions; tensors have bounded shapes and dtypes from a
fixed set; keyword arguments are plain numbers, booleans or short words.

This module's source is copied verbatim into repro.py (the bundle runs without
gatekeeper), so it imports nothing but ``re`` and defines only data and
``refusal``.
"""

import re

PUBLIC_FUNCTIONS = frozenset(
    {
        "torch.abs", "torch.add", "torch.addmm", "torch.amax", "torch.amin", "torch.argmax", "torch.baddbmm",
        "torch.bmm", "torch.cat", "torch.clamp", "torch.cos", "torch.cumsum", "torch.div", "torch.einsum",
        "torch.exp", "torch.log", "torch.log_softmax", "torch.logsumexp", "torch.matmul", "torch.max",
        "torch.mean", "torch.min", "torch.mm", "torch.mul", "torch.neg", "torch.norm", "torch.pow", "torch.prod",
        "torch.relu", "torch.rsqrt", "torch.sigmoid", "torch.sin", "torch.softmax", "torch.sort", "torch.sqrt",
        "torch.stack", "torch.std", "torch.sub", "torch.sum", "torch.tanh", "torch.topk", "torch.var",
        "torch.where", "torch.nn.functional.avg_pool2d", "torch.nn.functional.conv1d",
        "torch.nn.functional.conv2d", "torch.nn.functional.conv3d", "torch.nn.functional.conv_transpose2d",
        "torch.nn.functional.cross_entropy", "torch.nn.functional.dropout", "torch.nn.functional.embedding",
        "torch.nn.functional.gelu", "torch.nn.functional.group_norm", "torch.nn.functional.layer_norm",
        "torch.nn.functional.linear", "torch.nn.functional.log_softmax", "torch.nn.functional.max_pool2d",
        "torch.nn.functional.mse_loss", "torch.nn.functional.relu", "torch.nn.functional.scaled_dot_product_attention",
        "torch.nn.functional.silu", "torch.nn.functional.softmax",
    }
)  # fmt: skip
DTYPES = frozenset(
    {"bool", "uint8", "int8", "int16", "int32", "int64", "float16", "half", "bfloat16", "float32", "float",
     "float64", "double", "complex64"}
)  # fmt: skip
MAX_INPUTS = 8
MAX_DIMS = 8
MAX_ELEMENTS = 1 << 24  # per input: 64 MiB in float32
MAX_KWARGS = 16
_ATEN = re.compile(r"aten\.[a-z][a-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)?")
_KEY = re.compile(r"[a-z][a-z0-9_]{0,39}")
_WORD = re.compile(r"[A-Za-z0-9_.+-]{0,40}")


def _kwarg_ok(value):
    if value is None or isinstance(value, (bool, int, float)):
        return not isinstance(value, int) or abs(value) < 1 << 31
    if isinstance(value, str):
        return _WORD.fullmatch(value) is not None
    if isinstance(value, list):
        return len(value) <= MAX_DIMS and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    return False


def refusal(case):
    """Why ``case`` must not run (None: it may)."""
    if not isinstance(case, dict):
        return "not an object"
    op = case.get("op")
    if not isinstance(op, str) or not (_ATEN.fullmatch(op) or op in PUBLIC_FUNCTIONS):
        return "op is neither aten.<name>[.<overload>] nor a listed public torch function"
    shapes, dtypes = case.get("shapes"), case.get("dtypes")
    if not isinstance(shapes, list) or not isinstance(dtypes, list) or len(shapes) != len(dtypes):
        return "shapes and dtypes must be lists of one length"
    if len(shapes) > MAX_INPUTS:
        return f"more than {MAX_INPUTS} inputs"
    for shape in shapes:
        if not isinstance(shape, list) or len(shape) > MAX_DIMS:
            return f"a shape must be a list of at most {MAX_DIMS} sizes"
        elements = 1
        for size in shape:
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                return "a size must be a non-negative integer"
            elements *= size
        if elements > MAX_ELEMENTS:
            return f"an input of more than {MAX_ELEMENTS} elements"
    if not all(isinstance(d, str) and d in DTYPES for d in dtypes):
        return "a dtype outside " + ", ".join(sorted(DTYPES))
    seed = case.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 1 << 63:
        return "the seed must be a non-negative integer"
    kwargs = case.get("kwargs", {})
    if not isinstance(kwargs, dict) or len(kwargs) > MAX_KWARGS:
        return "kwargs must be an object of at most 16 entries"
    for key, value in kwargs.items():
        if not _KEY.fullmatch(key) or not _kwarg_ok(value):
            return "kwargs may only be numbers, booleans, null, short words or lists of integers"
    return None
