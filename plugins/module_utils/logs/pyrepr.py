# The Python dict reprs of slime's metric lines ("step 3: {'train/loss': nan, ...}"): read with
# the ast module, never evaluated, and made JSON-safe. Standard library only; Python 3.8+.
from __future__ import annotations

import ast
import math


class _Unsupported(ValueError):
    pass


_NAMES = {
    "nan": float("nan"),
    "NaN": float("nan"),
    "inf": float("inf"),
    "Infinity": float("inf"),
    "True": True,
    "False": False,
    "None": None,
}


def _eval(node):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
        raise _Unsupported("sign on a non-number")
    if isinstance(node, ast.Dict):
        return {_eval(k): _eval(v) for k, v in zip(node.keys, node.values) if k is not None}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(item) for item in node.elts]
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        # numpy / torch scalars: np.float64(0.5), tensor(0.5)
        value = _eval(node.args[0])
        if isinstance(value, (int, float)):
            return value
    if hasattr(ast, "Num") and isinstance(node, ast.Num):  # pragma: no cover (Python < 3.8 trees)
        return node.n
    if hasattr(ast, "Str") and isinstance(node, ast.Str):  # pragma: no cover
        return node.s
    raise _Unsupported(node.__class__.__name__)


def parse_payload(text):
    """A metric dict repr (single quotes, bare nan/inf/-inf) -> dict, or None."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
        value = _eval(tree.body)
    except (SyntaxError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def json_safe(value):
    """nan / inf / -inf become the strings 'nan', 'inf', '-inf' (JSON has no such numbers)."""
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
