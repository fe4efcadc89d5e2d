# The guide's two MUSA changes to slime's tools/convert_hf_to_torch_dist.py (§3.2), found from the
# Python syntax tree rather than line numbers: the MUSA_PATCH_PATH block before the first torch import,
# and a literal backend= in init_process_group(...). Pure text in, text out; used by
# modules/convert_patch.py. Standard library only; Python 3.8+.
from __future__ import annotations

import ast
import io
import json
import re
import tokenize

BLOCK_VAR = "_musa_patch_path"
BLOCK_COMMENT = [
    "# Import the MUSA compatibility package before torch/Megatron.  The launcher",
    "# only sets PYTHONPATH to this repository and Megatron, so the patch package",
    "# must be made importable here for accelerator's early bootstrap to take effect.",
]
CODING_RE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")


class AnchorError(Exception):
    pass


def block_lines(musa_patch_path, need_os, need_sys, lead_blank):
    imports = (["import os"] if need_os else []) + (["import sys"] if need_sys else [])
    lines = list(imports)
    if imports or lead_blank:
        lines += ["", ""]
    lines += BLOCK_COMMENT
    lines += [
        '%s = os.environ.get("MUSA_PATCH_PATH", %s)' % (BLOCK_VAR, json.dumps(musa_patch_path)),
        "if os.path.isdir(%s) and %s not in sys.path:" % (BLOCK_VAR, BLOCK_VAR),
        "    sys.path.insert(0, %s)" % BLOCK_VAR,
    ]
    return lines


def is_torch(name):
    return name == "torch" or name.startswith("torch.")


def imports_torch(node):
    if isinstance(node, ast.Import):
        return any(is_torch(alias.name) for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return not node.level and bool(node.module) and is_torch(node.module)
    return False


def binds_module(node, name):
    """`import os` / `import os.path` / `import os as os` bind `os`."""
    if not isinstance(node, ast.Import):
        return False
    for alias in node.names:
        bound = alias.asname or alias.name.split(".")[0]
        if bound == name and (alias.asname is None or alias.name == name):
            return True
    return False


def call_name(func):
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


class Source(object):
    """The file text with helpers to map AST positions (UTF-8 byte columns) to text offsets."""

    def __init__(self, text):
        self.text = text
        self.lines = text.splitlines(True)
        self.starts = []
        pos = 0
        for line in self.lines:
            self.starts.append(pos)
            pos += len(line)
        self.starts.append(pos)

    def char_col(self, lineno, byte_col):
        line = self.lines[lineno - 1]
        return len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def offset(self, lineno, byte_col):
        return self.starts[lineno - 1] + self.char_col(lineno, byte_col)

    def segment(self, node):
        return self.text[self.offset(node.lineno, node.col_offset): self.offset(node.end_lineno, node.end_col_offset)]

    def line(self, lineno):
        return self.lines[lineno - 1].rstrip("\r\n") if 0 < lineno <= len(self.lines) else ""


def comments_by_line(text):
    """{line: (char_col, comment text)} from the tokenizer (comments, not '#' in strings)."""
    found = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                found[tok.start[0]] = (tok.start[1], tok.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return found


def short(text, limit=140):
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def classify(original_text):
    """Form of the original backend expression (or of the comment a patch left)."""
    if "process_group_backend" in original_text:
        return "accelerator"
    if re.match(r"""^\s*["']nccl["']""", original_text):
        return "nccl"
    return "other"


def looks_like_expression(comment):
    body = comment.lstrip("#").strip().rstrip(",").strip()
    if not body:
        return False
    try:
        tree = ast.parse(body, "<comment>", "eval")
    except (SyntaxError, ValueError):
        return False
    # a bare word ("# TODO", a linter's directive) is a remark, not a saved expression
    return not isinstance(tree.body, ast.Name)


def analyse(text, path):
    """Parse and locate the anchors. Raises SyntaxError, or AnchorError naming every missing anchor."""
    tree = ast.parse(text, filename=path)
    src = Source(text)
    comments = comments_by_line(text)
    info = {"src": src, "tree": tree, "comments": comments}

    body = tree.body
    torch_index = next((i for i, node in enumerate(body) if imports_torch(node)), None)
    problems = []
    if torch_index is None:
        nested = next((n for n in ast.walk(tree) if imports_torch(n) and n not in body), None)
        if nested is not None:
            instead = "torch is imported only inside a function or block, first at line %d: %s" % (
                nested.lineno,
                short(src.line(nested.lineno)),
            )
        else:
            tops = [n for n in body if isinstance(n, (ast.Import, ast.ImportFrom))][:6]
            instead = "the file does not import torch; its module-level imports are %s" % (
                "; ".join("line %d: %s" % (n.lineno, short(src.line(n.lineno), 60)) for n in tops) or "none"
            )
        problems.append("no module-level import of torch in %s; found %s" % (path, instead))
    else:
        info["torch_node"] = body[torch_index]
        info["before_torch"] = body[:torch_index]
        info["prev_node"] = body[torch_index - 1] if torch_index else None

    info["block_node"] = None
    for node in body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == BLOCK_VAR for t in node.targets):
            info["block_node"] = node
            break

    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and call_name(n.func) == "init_process_group"]
    calls.sort(key=lambda n: (n.lineno, n.col_offset))
    targets = []
    for call in calls:
        for kw in call.keywords:
            if kw.arg == "backend":
                targets.append((call, kw))
    if not targets:
        if calls:
            instead = "; ".join("%s at line %d" % (short(src.segment(c), 120), c.lineno) for c in calls[:3])
        else:
            instead = "no call to init_process_group at all"
        problems.append("no call to init_process_group with a backend= keyword in %s; found %s" % (path, instead))
    info["targets"] = targets
    if problems:
        raise AnchorError("; ".join(problems))
    return info


def backend_state(info, backend):
    """For each backend= value: (value node, current literal or None, has trailing comment, original text, form)."""
    src, comments = info["src"], info["comments"]
    states = []
    for _call, kw in info["targets"]:
        value = kw.value
        literal = value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None
        end_char = src.char_col(value.end_lineno, value.end_col_offset)
        comment = comments.get(value.end_lineno)
        has_comment = comment is not None and comment[0] >= end_char
        # A literal followed by a comment holding an expression is our (or the guide's) patch:
        # "backend='musa:mccl,cpu:gloo', # accelerator.process_group_backend(),".
        patched = literal is not None and has_comment and looks_like_expression(comment[1])
        original = comment[1].lstrip("#").strip() if patched else src.segment(value)
        states.append(
            {
                "value": value,
                "literal": literal,
                "patched": patched,
                "original": original,
                "form": classify(original),
                "ok": literal == backend,
            }
        )
    return states


def is_patched(info, backend=None):
    """Whether the file carries any trace of the patch (block or a commented literal backend)."""
    return info["block_node"] is not None or any(s["patched"] for s in backend_state(info, backend))


def build(text, path, musa_patch_path, backend):
    """Return (new_text, details) for state=present. Raises SyntaxError / AnchorError."""
    info = analyse(text, path)
    src = info["src"]
    edits = []  # (start, end, replacement) on char offsets
    actions = []
    lines = src.lines

    block = info["block_node"]
    if block is None:
        torch_node = info["torch_node"]
        before = info["before_torch"]
        need_os = not any(binds_module(n, "os") for n in before)
        need_sys = not any(binds_module(n, "sys") for n in before)
        prev = info["prev_node"]
        floor = prev.end_lineno if prev is not None else 0  # 0-based index of the first line we may use
        i = torch_node.lineno - 1
        # keep comment lines that sit right on top of the import attached to it
        while i > floor and lines[i - 1].lstrip().startswith("#") and not (
            i - 1 < 2 and (lines[i - 1].startswith("#!") or CODING_RE.match(lines[i - 1]))
        ):
            i -= 1
        while i > floor and not lines[i - 1].strip():
            i -= 1
        new = block_lines(musa_patch_path, need_os, need_sys, lead_blank=i > 0)
        follow = lines[i] if i < len(lines) else ""
        if follow.strip():
            new.append("")
        insert = "".join(line + "\n" for line in new)
        if i > 0 and not lines[i - 1].endswith("\n"):
            insert = "\n" + insert
        edits.append((src.starts[i], src.starts[i], insert))
        added = [name for name, need in (("import os", need_os), ("import sys", need_sys)) if need]
        actions.append(
            "insert the MUSA_PATCH_PATH sys.path block (default %s)%s before line %d (%s)"
            % (
                musa_patch_path,
                " with " + " and ".join(added) if added else "",
                torch_node.lineno,
                short(src.line(torch_node.lineno), 60),
            )
        )
    else:
        value = block.value
        default = None
        if (
            isinstance(value, ast.Call)
            and len(value.args) >= 2
            and isinstance(value.args[1], ast.Constant)
            and isinstance(value.args[1].value, str)
        ):
            default = value.args[1]
        if default is not None and default.value != musa_patch_path:
            start = src.offset(default.lineno, default.col_offset)
            end = src.offset(default.end_lineno, default.end_col_offset)
            edits.append((start, end, json.dumps(musa_patch_path)))
            actions.append(
                "change the MUSA_PATCH_PATH default at line %d from %s to %s"
                % (default.lineno, default.value, musa_patch_path)
            )

    states = backend_state(info, backend)
    for state in states:
        value = state["value"]
        if state["ok"]:
            continue
        start = src.offset(value.lineno, value.col_offset)
        end = src.offset(value.end_lineno, value.end_col_offset)
        if state["patched"]:
            edits.append((start, end, repr(backend)))
            actions.append("change backend at line %d from %r to %r" % (value.lineno, state["literal"], backend))
            continue
        line_end = src.starts[value.end_lineno - 1] + len(lines[value.end_lineno - 1].rstrip("\r\n"))
        rest = text[end:line_end]
        comment = info["comments"].get(value.end_lineno)
        code_rest, old_comment = rest, ""
        if comment is not None:
            cut = comment[0] - src.char_col(value.end_lineno, value.end_col_offset)
            if cut >= 0:
                code_rest, old_comment = rest[:cut], rest[cut:]
        original = short(state["original"], 200)
        tail = code_rest.rstrip() + " # " + original + ("," if code_rest.strip() == "," else "")
        if old_comment:
            tail += " " + old_comment.strip()
        edits.append((start, line_end, repr(backend) + tail))
        actions.append("set backend=%r at line %d (was %s)" % (backend, value.lineno, short(src.segment(value), 80)))

    new_text = text
    for start, end, replacement in sorted(edits, key=lambda e: e[0], reverse=True):
        new_text = new_text[:start] + replacement + new_text[end:]
    forms = [s["form"] for s in states]
    form = next((f for f in ("accelerator", "nccl") if f in forms), "other")
    details = {
        "actions": actions,
        "form": form,
        "anchors": {
            "torch_import_line": info["torch_node"].lineno,
            "backend_lines": [s["value"].lineno for s in states],
        },
        "cuda_device_ids": [
            (kw.value.lineno, short(src.segment(kw.value), 80))
            for call, _kw in info["targets"]
            for kw in call.keywords
            if kw.arg == "device_id" and "cuda" in src.segment(kw.value)
        ],
        "was_patched": info["block_node"] is not None or any(s["patched"] for s in states),
        "block_line": block.lineno if block is not None else None,
    }
    return new_text, details


def backend_form(info, backend):
    forms = [s["form"] for s in backend_state(info, backend)]
    return next((f for f in ("accelerator", "nccl") if f in forms), "other")
