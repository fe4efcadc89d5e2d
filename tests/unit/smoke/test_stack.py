"""module_utils/smoke/stack.py: each import probed in its own interpreter (a crashing import is reported, the others
still probed), and what is missing mapped to the inventory setting that works around it."""
from __future__ import annotations

import json
import os
import sys

from ansible_collections.mtslime.posttrain.plugins.module_utils.smoke import stack

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
KNOWN_FLAGS = os.path.join(REPO, "plugins", "plugin_utils", "training", "known_flags.json")


def package(root, name, body):
    os.makedirs(os.path.join(root, name))
    with open(os.path.join(root, name, "__init__.py"), "w") as handle:
        handle.write(body)


def test_probe_imports_each_package_alone_and_reports_versions_errors_and_crashes(tmp_path):
    package(str(tmp_path), "megatron", "__version__ = '0.14.0'\n")
    package(str(tmp_path), "apex", "raise ImportError('apex was built for another torch')\n")
    package(str(tmp_path), "transformer_engine", "import os\nos._exit(139)\n")
    found = stack.probe(sys.executable, [str(tmp_path)], packages=("megatron", "apex", "transformer_engine", "sglang"))
    assert found["megatron"]["ok"] and found["megatron"]["version"] == "0.14.0"
    assert found["apex"] == dict(found["apex"], ok=False, error="ImportError: apex was built for another torch")
    assert not found["transformer_engine"]["ok"]
    assert found["transformer_engine"]["error"].startswith("the import ended the interpreter (rc 139)")
    assert found["sglang"]["error"] == "ModuleNotFoundError: No module named 'sglang'"


def test_torch_is_probed_for_its_device(tmp_path):
    package(str(tmp_path), "torch", "__version__ = '2.11.0+cu130'\nclass cuda:\n    is_available = staticmethod("
            "lambda: True)\n    device_count = staticmethod(lambda: 8)\n")
    found = stack.probe(sys.executable, [str(tmp_path)], packages=("torch",))
    assert found["torch"]["device"] == "cuda" and found["torch"]["device_count"] == 8
    assert stack.summary(found) == "torch 2.11.0+cu130 (cuda x8)"


def test_a_musa_torch_whose_cuda_is_aliased_is_musa(tmp_path):
    package(str(tmp_path), "torch", "__version__ = '2.5.0'\nclass musa:\n    is_available = staticmethod("
            "lambda: True)\n    device_count = staticmethod(lambda: 8)\ncuda = musa\n")
    found = stack.probe(sys.executable, [str(tmp_path)], packages=("torch",))
    assert (found["torch"]["device"], found["torch"]["device_count"]) == ("musa", 8)


def ok(**extra):
    return dict({"ok": True, "version": "1"}, **extra)


def missing(name):
    return {"ok": False, "error": "ModuleNotFoundError: No module named '%s'" % name}


def test_a_full_stack_lacks_nothing():
    full = {name: ok() for name in stack.PACKAGES}
    full["torch"] = ok(device="cuda", device_count=8)
    assert stack.lacks(full, "cuda") == [] and stack.advice([]) == []


def test_no_transformer_engine_nor_apex_names_the_flags_that_work_around_them():
    found = {name: ok() for name in stack.PACKAGES}
    found.update(torch=ok(device="cuda", device_count=8), transformer_engine=missing("transformer_engine"),
                 apex=missing("apex"))
    lacking = stack.lacks(found, "cuda")
    assert [item["what"] for item in lacking] == ["transformer_engine", "apex"]
    lines = stack.advice(lacking)
    assert lines[0].startswith("transformer_engine: ModuleNotFoundError: No module named 'transformer_engine' -> "
                               "convert_extra_args: [\"--transformer-impl\", \"local\"")
    assert "--no-gradient-accumulation-fusion" in lines[1]


def test_the_workaround_flags_are_megatrons_own():
    with open(KNOWN_FLAGS) as handle:
        flags = json.load(handle)["flags"]
    for flag in stack.NO_TE_FLAGS + stack.NO_APEX_FLAGS:
        if flag.startswith("--"):
            assert flag[2:] in flags, flag
    assert "local" in flags["transformer-impl"]["choices"]


def test_no_device_and_no_torch_say_there_is_no_inventory_fix():
    found = {name: ok() for name in stack.PACKAGES}
    found["torch"] = ok(device="cpu", device_count=0)
    assert stack.lacks(found, "musa")[0]["why"] == "torch sees no MUSA device"
    found["torch"] = missing("torch")
    first = stack.lacks(found, "cuda")[0]
    assert first["what"] == "torch" and first["fix"].startswith("none in the inventory")
