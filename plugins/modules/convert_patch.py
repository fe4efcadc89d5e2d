#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: convert_patch
short_description: Apply the guide's two MUSA changes to slime's tools/convert_hf_to_torch_dist.py
version_added: "0.1.0"
description:
  - Makes slime's HF to torch_dist converter run on Moore Threads GPUs, as §3.2 of the guide does by hand.
  - "(a) Before the first module-level import of torch, inserts a block that puts the MUSA patch directory
    (environment variable C(MUSA_PATCH_PATH), default O(musa_patch_path)) at the front of C(sys.path),
    adding C(import sys), and C(import os) when C(os) is only imported after torch."
  - "(b) Sets the C(backend=) keyword of the C(init_process_group(...)) call to the literal O(backend),
    keeping the original expression in a trailing comment."
  - Anchors are found from the Python syntax tree, not line numbers, so the module handles the upstream HEAD form
    (C(backend=accelerator.process_group_backend())), the tagged releases' C(backend="nccl") and the Moore Threads fork.
  - When an anchor is missing (upstream changed the file) it fails, changes nothing and says what the file has instead.
  - The new text must compile before it replaces the file; the file is replaced atomically and keeps its mode.
options:
  path:
    description: The converter script.
    type: path
    default: /home/slime/tools/convert_hf_to_torch_dist.py
  musa_patch_path:
    description: Default of C(MUSA_PATCH_PATH) written into the block (the megatron-lm-musa-patch checkout in the container).
    type: str
    default: /home/megatron-lm-musa-patch
  backend:
    description: Process-group backend string written as the C(backend=) literal.
    type: str
    default: musa:mccl,cpu:gloo
  backup:
    description:
      - Keep a one-time copy of the unpatched file as C(<path>.orig). An existing C(.orig) is never overwritten,
        and no copy is made of a file that is already patched.
    type: bool
    default: true
  state:
    description:
      - C(present) patches the file (a file patched with another backend or patch path gets only that value updated).
      - C(absent) restores the file from C(<path>.orig); the backup is kept.
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - mtslime.posttrain.attributes
attributes:
  check_mode:
    support: full
    details:
      - Returns the diff and changes nothing (no backup either).
  diff_mode:
    support: full
  idempotent:
    support: full
seealso:
  - module: mtslime.posttrain.mcore_checkpoint
author:
  - mtslime.posttrain contributors
"""

EXAMPLES = r"""
- name: Patch the converter for MUSA (guide §3.2)
  mtslime.posttrain.convert_patch:
    path: /home/slime/tools/convert_hf_to_torch_dist.py
  register: __convert_patch

- name: Show what would change
  mtslime.posttrain.convert_patch:
    backend: "mccl"
  check_mode: true
  diff: true

- name: Restore the original converter
  mtslime.posttrain.convert_patch:
    state: absent
"""

RETURN = r"""
path:
  description: The converter script.
  returned: always
  type: str
form:
  description: >-
    Which form the file's init_process_group backend had (for an already patched file, what the trailing comment says it had):
    C(accelerator) (upstream HEAD, C(accelerator.process_group_backend())), C(nccl) (tags up to v0.3.1, C(backend="nccl")) or C(other).
  returned: always
  type: str
  sample: accelerator
backup_file:
  description: Path of the backup of the unpatched file when it exists (or, in check mode, would be created); null otherwise.
  returned: always
  type: str
anchors:
  description: Where the changes go, 1-based line numbers in the file as it was.
  returned: when state=present
  type: dict
  contains:
    torch_import_line:
      description: Line of the first module-level torch import.
      type: int
    backend_lines:
      description: Lines of the C(backend=) values of init_process_group calls.
      type: list
      elements: int
actions:
  description: What was done or, in check mode, would be done.
  returned: always
  type: list
  elements: str
diff:
  description: Before and after text of the file.
  returned: when changed
  type: dict
"""

import ast
import io
import json
import os
import re
import shutil
import tempfile
import tokenize

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import atomic_write, read_text, text_diff

MODULE = "mtslime.posttrain.convert_patch"
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
    # a bare word ("# noqa", "# TODO") is a remark, not a saved expression
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
            % (musa_patch_path, " with " + " and ".join(added) if added else "", torch_node.lineno, short(src.line(torch_node.lineno), 60))
        )
    else:
        value = block.value
        default = None
        if isinstance(value, ast.Call) and len(value.args) >= 2 and isinstance(value.args[1], ast.Constant) and isinstance(value.args[1].value, str):
            default = value.args[1]
        if default is not None and default.value != musa_patch_path:
            start = src.offset(default.lineno, default.col_offset)
            end = src.offset(default.end_lineno, default.end_col_offset)
            edits.append((start, end, json.dumps(musa_patch_path)))
            actions.append("change the MUSA_PATCH_PATH default at line %d from %s to %s" % (default.lineno, default.value, musa_patch_path))

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


def make_backup(path, backup_path):
    """Copy `path` to `backup_path` unless it exists (never overwritten). True if created."""
    directory = os.path.dirname(backup_path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(backup_path), suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        shutil.copy2(path, tmp)
        try:
            os.link(tmp, backup_path)  # fails if the backup appeared meanwhile
        except FileExistsError:
            return False
        except OSError:
            if os.path.lexists(backup_path):
                return False
            os.rename(tmp, backup_path)
        return True
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def present(module, path, text):
    params = module.params
    backup_path = path + ".orig"
    result = dict(changed=False, path=path, backup_file=backup_path if os.path.exists(backup_path) else None, actions=[])
    try:
        new_text, details = build(text, path, params["musa_patch_path"], params["backend"])
    except SyntaxError as exc:
        module.fail_json(
            msg="%s does not parse as Python (SyntaxError at line %s: %s): %s; nothing was changed; restore the file "
            "(from %s if it exists, or with git checkout in the slime repository) and rerun %s"
            % (path, exc.lineno, exc.msg, short(exc.text or ""), backup_path, MODULE),
            **result
        )
    except AnchorError as exc:
        module.fail_json(
            msg="%s; nothing was changed; update %s or patch the file by hand (guide §3.2)" % (exc, MODULE), **result
        )
    result.update(form=details["form"], anchors=details["anchors"])
    if details["block_line"] is not None and details["block_line"] > details["anchors"]["torch_import_line"]:
        module.warn(
            "%s sets %s at line %d, after the first torch import at line %d: the MUSA patch path is added too late"
            % (path, BLOCK_VAR, details["block_line"], details["anchors"]["torch_import_line"])
        )
    if not os.path.isdir(params["musa_patch_path"]):
        module.warn(
            "MUSA patch directory %s does not exist on this host: the inserted block will skip it unless MUSA_PATCH_PATH "
            "points elsewhere at run time" % params["musa_patch_path"]
        )
    for lineno, device in details["cuda_device_ids"]:
        module.warn(
            "%s line %d passes device_id=%s to init_process_group; on MUSA that CUDA device only works if musa_patch "
            "maps it (upstream HEAD passes none on MUSA): check the conversion log" % (path, lineno, device)
        )
    if new_text == text:
        result["actions"].append("%s is already patched (backend %r)" % (path, params["backend"]))
        module.exit_json(**result)

    try:
        compile(new_text, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        module.fail_json(
            msg="the patched text of %s would not compile (SyntaxError at line %s: %s); nothing was changed; "
            "update %s or patch the file by hand (guide §3.2)" % (path, exc.lineno, exc.msg, MODULE),
            **result
        )

    verb = "would " if module.check_mode else ""
    if params["backup"]:
        if os.path.exists(backup_path):
            result["actions"].append("kept the existing backup %s" % backup_path)
            old = read_text(backup_path)
            if not details["was_patched"] and old != text:
                module.warn(
                    "the existing backup %s differs from the current unpatched %s (was the file updated?); it is kept, "
                    "and state=absent would restore that older copy" % (backup_path, path)
                )
        elif details["was_patched"]:
            result["actions"].append("no backup made: %s is already patched (restore the original with git)" % path)
        else:
            if not module.check_mode:
                try:
                    make_backup(path, backup_path)
                except OSError as exc:
                    module.fail_json(msg="cannot write the backup %s: %s; nothing was changed; check permissions or set backup=false" % (backup_path, exc), **result)
            result["backup_file"] = backup_path
            result["actions"].append("%sback up the original to %s" % (verb, backup_path))

    if not module.check_mode:
        try:
            atomic_write(path, new_text)
        except OSError as exc:
            module.fail_json(msg="cannot write %s: %s; check permissions on %s" % (path, exc, os.path.dirname(path)), **result)
    result["actions"].extend("%s%s" % (verb, a) for a in details["actions"])
    result.update(changed=True, diff=text_diff(text, new_text, path))
    module.exit_json(**result)


def absent(module, path, text):
    backup_path = path + ".orig"
    result = dict(changed=False, path=path, backup_file=None, actions=[], form="other")
    try:
        info = analyse(text, path)
        patched = is_patched(info, module.params["backend"])
        result["form"] = backend_form(info, module.params["backend"])
    except (SyntaxError, AnchorError):
        info, patched = None, None
    if os.path.exists(backup_path):
        result["backup_file"] = backup_path
        original = read_text(backup_path)
        if original == text:
            result["actions"].append("%s already equals its backup %s" % (path, backup_path))
            module.exit_json(**result)
        try:
            backup_info = analyse(original, backup_path)
            backup_patched = is_patched(backup_info)
        except SyntaxError:
            backup_patched = True
        except AnchorError:
            backup_patched = False
        if backup_patched:
            module.fail_json(
                msg="the backup %s is not an unpatched converter (it is patched or does not parse); %s was not restored; "
                "restore it with git checkout in the slime repository" % (backup_path, path),
                **result
            )
        if not module.check_mode:
            try:
                atomic_write(path, original)
            except OSError as exc:
                module.fail_json(msg="cannot write %s: %s; check permissions on %s" % (path, exc, os.path.dirname(path)), **result)
        result["actions"].append("%srestore %s from %s (the backup is kept)" % ("would " if module.check_mode else "", path, backup_path))
        result.update(changed=True, diff=text_diff(text, original, path))
        module.exit_json(**result)
    if patched is False:
        result["actions"].append("%s is not patched; nothing to restore" % path)
        module.exit_json(**result)
    module.fail_json(
        msg="%s is patched (or could not be checked) but there is no backup %s to restore it from; restore it with "
        "git checkout -- tools/convert_hf_to_torch_dist.py in the slime repository" % (path, backup_path),
        **result
    )


def backend_form(info, backend):
    forms = [s["form"] for s in backend_state(info, backend)]
    return next((f for f in ("accelerator", "nccl") if f in forms), "other")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/home/slime/tools/convert_hf_to_torch_dist.py"),
            musa_patch_path=dict(type="str", default="/home/megatron-lm-musa-patch"),
            backend=dict(type="str", default="musa:mccl,cpu:gloo"),
            backup=dict(type="bool", default=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    if not os.path.isfile(path):
        module.fail_json(
            msg="no file %s; set path to slime's tools/convert_hf_to_torch_dist.py (in the container: "
            "/home/slime/tools/convert_hf_to_torch_dist.py)" % path,
            path=path,
            actions=[],
        )
    try:
        text = read_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        module.fail_json(msg="cannot read %s as UTF-8 text: %s" % (path, exc), path=path, actions=[])
    if module.params["state"] == "absent":
        absent(module, path, text)
    present(module, path, text)


if __name__ == "__main__":
    main()
