"""mtslime.posttrain.convert_patch: the guide's §3.2 MUSA diff on tools/convert_hf_to_torch_dist.py, on the
converter's real forms (tests/standins/convert_forms/README.md): upstream THUDM/slime at HEAD 624b824a8 and at
v0.3.1 (transcribed verbatim) and the Moore Threads fork that the guide's diff targets (reconstructed)."""
from __future__ import annotations

import difflib
import os
import shutil
import stat

import pytest

from ansible_collections.mtslime.posttrain.plugins.modules import convert_patch as module

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "convert")
FORMS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "standins",
                     "convert_forms")
# short names used below -> the file that holds that form
NAMES = {
    "head.py.txt": os.path.join(FORMS, "upstream_624b824a8.py.txt"),
    "v0.3.1.py.txt": os.path.join(FORMS, "upstream_v0.3.1.py.txt"),
    "mt_fork.py.txt": os.path.join(FORMS, "mt_fork.py.txt"),
    "guide_hunks.diff": os.path.join(FORMS, "guide_musa_patch.diff"),
    "head_patched.py.txt": os.path.join(DATA, "upstream_624b824a8.patched.py.txt"),
    "v0.3.1_patched.py.txt": os.path.join(DATA, "upstream_v0.3.1.patched.py.txt"),
}
GUIDE_BACKEND_LINE = "        backend='musa:mccl,cpu:gloo', # accelerator.process_group_backend(),\n"
BLOCK = [
    "import sys\n",
    "\n",
    "\n",
    "# Import the MUSA compatibility package before torch/Megatron.  The launcher\n",
    "# only sets PYTHONPATH to this repository and Megatron, so the patch package\n",
    "# must be made importable here for accelerator's early bootstrap to take effect.\n",
    '_musa_patch_path = os.environ.get("MUSA_PATCH_PATH", "/home/megatron-lm-musa-patch")\n',
    "if os.path.isdir(_musa_patch_path) and _musa_patch_path not in sys.path:\n",
    "    sys.path.insert(0, _musa_patch_path)\n",
]


def where(name):
    return NAMES.get(name) or os.path.join(DATA, name)


def fixture(name):
    with open(where(name), encoding="utf-8") as handle:
        return handle.read()


def install(tmp_path, name, mode=0o644):
    """Copy a fixture to <tmp>/tools/convert_hf_to_torch_dist.py."""
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    path = str(tools / "convert_hf_to_torch_dist.py")
    shutil.copyfile(where(name), path)
    os.chmod(path, mode)
    return path


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def hunks(before, after):
    """Body lines of a unified diff, hunk headers reduced to their line ranges."""
    out = []
    for line in difflib.unified_diff(before.splitlines(True), after.splitlines(True), n=3):
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            out.append("@@ " + line.split("@@")[1].strip() + "\n")
        else:
            out.append(line if line.strip() else line[0] + "\n")
    return out


def guide_hunks():
    out = []
    for line in fixture("guide_hunks.diff").splitlines(True):
        if line.startswith(("diff ", "index ", "---", "+++")):
            continue
        if line.startswith("@@"):
            out.append("@@ " + line.split("@@")[1].strip() + "\n")
        else:
            out.append(line if line.strip() else line[0] + "\n")
    return out


def assert_compiles(text):
    compile(text, "convert_hf_to_torch_dist.py", "exec", dont_inherit=True)


# ---- the three upstream shapes ----

def test_head_form_matches_guide(run_module, tmp_path):
    path = install(tmp_path, "head.py.txt")
    result, failed = run_module(module, {"path": path}, diff=True)
    assert not failed, result
    assert result["changed"]
    assert result["form"] == "accelerator"
    after = read(path)
    assert after == fixture("head_patched.py.txt")
    lines = after.splitlines(True)
    start = lines.index("import shutil\n") + 1
    assert lines[start:start + len(BLOCK)] == BLOCK
    assert lines[start + len(BLOCK)] == "\n" and lines[start + len(BLOCK) + 1] == "import torch\n"
    assert GUIDE_BACKEND_LINE in lines
    assert result["anchors"] == {"torch_import_line": 5, "backend_lines": [104]}
    assert result["diff"]["before"] == fixture("head.py.txt") and result["diff"]["after"] == after
    assert result["backup_file"] == path + ".orig"
    assert read(path + ".orig") == fixture("head.py.txt")
    assert any("sys.path block" in a for a in result["actions"])
    assert any("set backend='musa:mccl,cpu:gloo' at line 104" in a for a in result["actions"])
    assert_compiles(after)


def test_mt_fork_form_reproduces_guide_diff(run_module, tmp_path):
    path = install(tmp_path, "mt_fork.py.txt")
    result, failed = run_module(module, {"path": path})
    assert not failed and result["changed"]
    assert result["form"] == "accelerator"
    # same hunks, same line numbers as the guide's diff (@@ -2,6 +2,15 @@ and @@ -124,7 +133,7 @@)
    assert hunks(fixture("mt_fork.py.txt"), read(path)) == guide_hunks()


def test_v031_nccl_form(run_module, tmp_path):
    path = install(tmp_path, "v0.3.1.py.txt")
    result, failed = run_module(module, {"path": path})
    assert not failed and result["changed"]
    assert result["form"] == "nccl"
    assert result["anchors"] == {"torch_import_line": 5, "backend_lines": [102]}
    after = read(path)
    assert after == fixture("v0.3.1_patched.py.txt")
    assert "        backend='musa:mccl,cpu:gloo', # \"nccl\",\n" in after
    assert "".join(BLOCK) in after
    assert after.index("_musa_patch_path = ") < after.index("import torch\n")
    assert_compiles(after)
    again, dummy = run_module(module, {"path": path})
    assert not again["changed"] and again["form"] == "nccl"


def changes(hunk_lines):
    """The added and removed lines of hunks, without their context (which differs between the forms)."""
    return [line for line in hunk_lines if line[:1] in "+-" and not line.startswith("@@")]


@pytest.mark.parametrize("name", ["head.py.txt", "v0.3.1.py.txt"])
def test_upstream_forms_get_the_guides_changes_without_its_context(run_module, tmp_path, name):
    """The guide's diff targets the MT fork; upstream has no `import json` and another device_id= line, so `patch`
    applies it only with fuzz. The module makes the same changes there, found from the syntax tree."""
    before = fixture(name)
    assert "import json\n" not in before
    assert "device_id=None if accelerator.is_musa_available()" not in before
    path = install(tmp_path, name)
    result, failed = run_module(module, {"path": path})
    assert not failed and result["changed"]
    guide = changes(guide_hunks())
    if name == "v0.3.1.py.txt":  # the backend it replaces is "nccl", kept in the comment
        guide = [g.replace("accelerator.process_group_backend()", '"nccl"') for g in guide]
    assert changes(hunks(before, read(path))) == guide
    assert_compiles(read(path))


def test_the_image_converter_is_the_fork_form(run_module, tmp_path):
    """tests/standins/rootfs/home/slime/tools/convert_hf_to_torch_dist.py is what the guide patches: the fork's
    `import json` and device_id= line, and the guide's changes (the same lines) when the module patches it."""
    image = os.path.join(os.path.dirname(FORMS), "rootfs", "home", "slime", "tools", "convert_hf_to_torch_dist.py")
    text = read(image)
    fork = fixture("mt_fork.py.txt").splitlines(True)
    assert fork[1] == "import json\n" and "import gc\nimport json\nimport os\nimport shutil\n" in text
    assert fork[129] in text  # the fork's device_id= line (guide diff context, line 130)
    path = str(tmp_path / "convert_hf_to_torch_dist.py")
    shutil.copyfile(image, path)
    result, failed = run_module(module, {"path": path})
    assert not failed and result["form"] == "accelerator"
    assert changes(hunks(text, read(path))) == changes(guide_hunks())


def test_refuses_when_the_patch_target_changed_upstream(run_module, tmp_path):
    """A later upstream that sets up the process group in a helper: no backend= anchor is left in the file."""
    text = fixture("head.py.txt")
    call = text[text.index("    dist.init_process_group(\n"): text.index("    args = get_args()\n")]
    changed = text.replace(call, "    init_distributed(world_size, global_rank, local_rank)\n").replace(
        "from slime.utils import accelerator\n",
        "from slime.utils import accelerator\nfrom slime.utils.distributed_utils import init_distributed\n",
    )
    path = str(tmp_path / "convert_hf_to_torch_dist.py")
    with open(path, "w") as handle:
        handle.write(changed)
    result, failed = run_module(module, {"path": path})
    assert failed and read(path) == changed and not os.path.exists(path + ".orig")
    assert result["msg"].startswith(
        "%s: the patch target changed upstream: no call to init_process_group with a backend= keyword in %s; "
        "found no call to init_process_group at all; nothing was changed. Fix: patch %s by hand" % (path, path, path)
    )
    assert "upstream v0.3.1 or 624b824a8" in result["msg"]


def test_os_imported_after_torch_gets_import_os(run_module, tmp_path):
    text = fixture("v0.3.1.py.txt").replace(
        "import gc\nimport os\nimport shutil\n\nimport torch\n", "import gc\nimport shutil\n\nimport torch\nimport os\n"
    )
    path = str(tmp_path / "convert.py")
    with open(path, "w") as handle:
        handle.write(text)
    result, failed = run_module(module, {"path": path})
    assert not failed
    after = read(path)
    assert "import shutil\nimport os\nimport sys\n\n\n# Import the MUSA" in after
    assert any("with import os and import sys" in a for a in result["actions"])
    assert_compiles(after)


def test_sys_already_imported_is_not_repeated(run_module, tmp_path):
    text = fixture("head.py.txt").replace("import shutil\n", "import shutil\nimport sys\n")
    path = str(tmp_path / "convert.py")
    with open(path, "w") as handle:
        handle.write(text)
    run_module(module, {"path": path})
    after = read(path)
    assert after.count("import sys\n") == 1
    assert "import sys\n\n\n# Import the MUSA" in after


def test_torch_import_first_statement_and_one_line_call(run_module, tmp_path):
    text = (
        '"""Tiny converter."""\nimport torch\nimport torch.distributed as dist\n\n\n'
        "def main():\n    dist.init_process_group(backend=\"nccl\")  # v0.1.0 style\n"
    )
    path = str(tmp_path / "convert.py")
    with open(path, "w") as handle:
        handle.write(text)
    result, failed = run_module(module, {"path": path})
    assert not failed and result["form"] == "nccl"
    after = read(path)
    assert after.startswith('"""Tiny converter."""\nimport os\nimport sys\n\n\n# Import the MUSA')
    assert "\n\nimport torch\n" in after
    assert "dist.init_process_group(backend='musa:mccl,cpu:gloo') # \"nccl\" # v0.1.0 style\n" in after
    assert_compiles(after)
    again, dummy = run_module(module, {"path": path})
    assert not again["changed"]


# ---- idempotency and updates ----

def test_already_patched_is_unchanged(run_module, tmp_path):
    path = install(tmp_path, "head_patched.py.txt")
    result, failed = run_module(module, {"path": path})
    assert not failed and not result["changed"]
    assert result["form"] == "accelerator"
    assert read(path) == fixture("head_patched.py.txt")
    assert not os.path.exists(path + ".orig")
    assert any("already patched" in a for a in result["actions"])


def test_second_run_is_unchanged(run_module, tmp_path):
    path = install(tmp_path, "mt_fork.py.txt")
    run_module(module, {"path": path})
    result, dummy = run_module(module, {"path": path})
    assert not result["changed"]


def test_other_backend_updates_only_the_literal(run_module, tmp_path):
    path = install(tmp_path, "head_patched.py.txt")
    with open(path, "w") as handle:
        handle.write(fixture("head_patched.py.txt").replace("'musa:mccl,cpu:gloo'", "'mccl'"))
    before = read(path)
    result, failed = run_module(module, {"path": path}, diff=True)
    assert not failed and result["changed"]
    assert read(path) == fixture("head_patched.py.txt")
    diff = hunks(before, read(path))
    assert [line for line in diff if line[0] in "+-"] == [
        "-        backend='mccl', # accelerator.process_group_backend(),\n",
        "+" + GUIDE_BACKEND_LINE,
    ]
    assert any("from 'mccl' to 'musa:mccl,cpu:gloo'" in a for a in result["actions"])
    assert not os.path.exists(path + ".orig")  # a patched file is not the original


def test_configured_backend_and_patch_path(run_module, tmp_path):
    path = install(tmp_path, "head.py.txt")
    run_module(module, {"path": path, "backend": "mccl", "musa_patch_path": "/opt/musa_patch"})
    after = read(path)
    assert "backend='mccl', # accelerator.process_group_backend()," in after
    assert '_musa_patch_path = os.environ.get("MUSA_PATCH_PATH", "/opt/musa_patch")' in after
    result, dummy = run_module(module, {"path": path})  # back to the defaults: only the two values change
    assert result["changed"]
    assert read(path) == fixture("head_patched.py.txt")


# ---- anchors missing / broken files ----

def test_missing_backend_anchor(run_module, tmp_path):
    path = install(tmp_path, "no_backend_kwarg.py.txt")
    result, failed = run_module(module, {"path": path})
    assert failed
    msg = result["msg"]
    assert "no call to init_process_group with a backend= keyword in %s" % path in msg
    assert "found dist.init_process_group(**kwargs) at line 17" in msg
    assert "the patch target changed upstream" in msg
    assert "patch %s by hand as the guide's §3.2 diff shows" % path in msg
    assert read(path) == fixture("no_backend_kwarg.py.txt")
    assert not os.path.exists(path + ".orig")


def test_no_init_process_group_at_all(run_module, tmp_path):
    path = str(tmp_path / "convert.py")
    with open(path, "w") as handle:
        handle.write("import torch\n\nprint(torch.__version__)\n")
    result, failed = run_module(module, {"path": path})
    assert failed and "no call to init_process_group at all" in result["msg"] and path in result["msg"]


def test_missing_torch_import(run_module, tmp_path):
    path = install(tmp_path, "no_torch_import.py.txt")
    result, failed = run_module(module, {"path": path})
    assert failed
    assert "no module-level import of torch in %s" % path in result["msg"]
    assert "only inside a function or block, first at line 9: import torch" in result["msg"]
    assert "or update mtslime.posttrain.convert_patch for the new form" in result["msg"]
    assert read(path) == fixture("no_torch_import.py.txt")


def test_both_anchors_missing_in_one_message(run_module, tmp_path):
    path = str(tmp_path / "convert.py")
    with open(path, "w") as handle:
        handle.write("import os\nimport json\n\nprint(os.getcwd(), json.dumps({}))\n")
    result, failed = run_module(module, {"path": path})
    assert failed
    assert "no module-level import of torch" in result["msg"] and "line 1: import os" in result["msg"]
    assert "no call to init_process_group at all" in result["msg"]


def test_file_that_does_not_parse(run_module, tmp_path):
    path = install(tmp_path, "syntax_error.py.txt")
    result, failed = run_module(module, {"path": path})
    assert failed
    assert "%s does not parse as Python (SyntaxError at line" % path in result["msg"]
    assert path + ".orig" in result["msg"]
    assert read(path) == fixture("syntax_error.py.txt")
    assert not os.path.exists(path + ".orig")


def test_result_that_would_not_compile_changes_nothing(run_module, tmp_path, monkeypatch):
    path = install(tmp_path, "head.py.txt")
    real_build = module.build

    def broken_build(*args, **kwargs):
        text, details = real_build(*args, **kwargs)
        broken = text.replace("    sys.path.insert(0, _musa_patch_path)\n", "sys.path.insert(0, _musa_patch_path\n")
        return broken, details

    monkeypatch.setattr(module, "build", broken_build)
    result, failed = run_module(module, {"path": path})
    assert failed
    assert "the patched text of %s would not compile" % path in result["msg"]
    assert read(path) == fixture("head.py.txt")
    assert not os.path.exists(path + ".orig")
    assert [n for n in os.listdir(os.path.dirname(path)) if n.endswith(".tmp")] == []


def test_missing_file(run_module, tmp_path):
    path = str(tmp_path / "tools" / "convert_hf_to_torch_dist.py")
    result, failed = run_module(module, {"path": path})
    assert failed and "no file %s" % path in result["msg"] and "set path" in result["msg"]


# ---- check mode, mode, backup, state=absent ----

def test_check_mode_returns_diff_changes_nothing(run_module, tmp_path):
    path = install(tmp_path, "head.py.txt")
    result, failed = run_module(module, {"path": path}, check_mode=True, diff=True)
    assert not failed and result["changed"]
    assert result["diff"]["after"] == fixture("head_patched.py.txt")
    assert read(path) == fixture("head.py.txt")
    assert not os.path.exists(path + ".orig")
    assert result["backup_file"] == path + ".orig"
    assert all(a.startswith(("would ", "kept")) for a in result["actions"])


def test_mode_is_kept(run_module, tmp_path):
    path = install(tmp_path, "head.py.txt", mode=0o750)
    run_module(module, {"path": path})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o750
    assert stat.S_IMODE(os.stat(path + ".orig").st_mode) == 0o750


def test_backup_kept_once(run_module, tmp_path):
    path = install(tmp_path, "head.py.txt")
    run_module(module, {"path": path})
    # someone edits the backup's source; a later update must not overwrite the backup
    with open(path, "w") as handle:
        handle.write(fixture("head_patched.py.txt").replace("'musa:mccl,cpu:gloo'", "'mccl'"))
    result, dummy = run_module(module, {"path": path})
    assert result["changed"]
    assert read(path + ".orig") == fixture("head.py.txt")
    assert any("kept the existing backup" in a for a in result["actions"])
    # restore, then patch again: the backup is still the single original copy
    run_module(module, {"path": path, "state": "absent"})
    run_module(module, {"path": path})
    assert read(path + ".orig") == fixture("head.py.txt")
    names = sorted(os.listdir(os.path.dirname(path)))
    assert names == ["convert_hf_to_torch_dist.py", "convert_hf_to_torch_dist.py.orig"]


def test_backup_false(run_module, tmp_path):
    path = install(tmp_path, "head.py.txt")
    result, dummy = run_module(module, {"path": path, "backup": False})
    assert result["changed"] and result["backup_file"] is None
    assert not os.path.exists(path + ".orig")


def test_state_absent_restores(run_module, tmp_path):
    path = install(tmp_path, "mt_fork.py.txt", mode=0o755)
    run_module(module, {"path": path})
    check, dummy = run_module(module, {"path": path, "state": "absent"}, check_mode=True)
    assert check["changed"] and read(path) != fixture("mt_fork.py.txt")
    result, failed = run_module(module, {"path": path, "state": "absent"}, diff=True)
    assert not failed and result["changed"]
    assert read(path) == fixture("mt_fork.py.txt")
    assert result["diff"]["after"] == fixture("mt_fork.py.txt")
    assert os.path.exists(path + ".orig")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o755
    again, dummy = run_module(module, {"path": path, "state": "absent"})
    assert not again["changed"]


def test_state_absent_unpatched_without_backup(run_module, tmp_path):
    path = install(tmp_path, "head.py.txt")
    result, failed = run_module(module, {"path": path, "state": "absent"})
    assert not failed and not result["changed"]
    assert any("not patched" in a for a in result["actions"])


def test_state_absent_patched_without_backup_fails(run_module, tmp_path):
    path = install(tmp_path, "head_patched.py.txt")
    result, failed = run_module(module, {"path": path, "state": "absent"})
    assert failed
    assert path in result["msg"] and path + ".orig" in result["msg"] and "git checkout" in result["msg"]
    assert read(path) == fixture("head_patched.py.txt")


@pytest.mark.parametrize(
    "name", ["head.py.txt", "v0.3.1.py.txt", "mt_fork.py.txt", "head_patched.py.txt", "v0.3.1_patched.py.txt"]
)
def test_fixtures_compile(name):
    assert_compiles(fixture(name))


def test_unrelated_comment_on_backend_line_is_not_taken_for_a_patch(run_module, tmp_path):
    text = fixture("v0.3.1.py.txt").replace('        backend="nccl",\n', '        backend="nccl",  # noqa\n')
    path = str(tmp_path / "convert.py")
    with open(path, "w") as handle:
        handle.write(text)
    result, failed = run_module(module, {"path": path})
    assert not failed and result["form"] == "nccl"
    assert "        backend='musa:mccl,cpu:gloo', # \"nccl\", # noqa\n" in read(path)
    assert os.path.exists(path + ".orig")


def test_nccl_device_id_warns(tmp_path, run_module, monkeypatch):
    warnings = []
    monkeypatch.setattr(module.AnsibleModule, "warn", lambda self, msg: warnings.append(msg))
    path = install(tmp_path, "v0.3.1.py.txt")
    run_module(module, {"path": path, "musa_patch_path": str(tmp_path)})
    assert len(warnings) == 1
    assert "device_id=torch.device(f\"cuda:{local_rank}\")" in warnings[0] and path in warnings[0]
    warnings.clear()
    (tmp_path / "other").mkdir()
    path = install(tmp_path / "other", "head.py.txt")
    run_module(module, {"path": path})
    assert len(warnings) == 1 and "/home/megatron-lm-musa-patch does not exist" in warnings[0]
    # the upstream file changed after the backup was made: the old backup is kept, with a warning
    warnings.clear()
    with open(path, "w") as handle:
        handle.write(fixture("mt_fork.py.txt"))
    result, dummy = run_module(module, {"path": path, "musa_patch_path": str(tmp_path)})
    assert read(path + ".orig") == fixture("head.py.txt")
    assert len(warnings) == 1 and "differs from the current unpatched" in warnings[0]
