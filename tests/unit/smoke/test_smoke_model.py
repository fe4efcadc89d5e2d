"""mtslime.posttrain.smoke_model: the scratch directory is its own (an earlier smoke run's is emptied, anything
else refused and left alone), check mode writes nothing, a failed run's scratch is moved aside and named."""
from __future__ import annotations

import os
import sys

from ansible_collections.mtslime.posttrain.plugins.modules import smoke_model as module

ARGS = {"num-layers": 36, "hidden-size": 4096, "num-attention-heads": 32, "qk-layernorm": True}


def test_check_mode_probes_and_describes_the_model_but_writes_nothing(tmp_path, run_module):
    scratch = str(tmp_path / "smoke")
    result, failed = run_module(module, {"path": scratch, "model_args": ARGS}, check_mode=True)
    assert not failed and not result["changed"]
    assert result["model_type"] == "qwen3" and result["model_args"]["num-layers"] == 2
    assert result["config_from"] == "model_args" and set(result["stack"]) == set(module.smoke_stack.PACKAGES)
    assert not os.path.exists(scratch)


def test_a_directory_that_is_not_a_smoke_scratch_is_refused_and_kept(tmp_path, run_module):
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "weights.bin").write_text("keep me")
    result, failed = run_module(module, {"path": str(tmp_path / "precious"), "model_args": ARGS})
    assert failed and "is not a smoke run's scratch directory" in result["msg"] and "smoke_dir" in result["msg"]
    assert (tmp_path / "precious" / "weights.bin").read_text() == "keep me"


def test_an_earlier_scratch_is_emptied_and_a_missing_transformers_is_reported(tmp_path, run_module, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # an image without transformers
    scratch = tmp_path / "smoke"
    scratch.mkdir()
    (scratch / module.MARKER).write_text("")
    (scratch / "old.log").write_text("old")
    result, failed = run_module(module, {"path": str(scratch), "model_args": ARGS})
    assert not (scratch / "old.log").exists() and (scratch / module.MARKER).exists()
    assert failed and not result["changed"]
    assert "writing the qwen3 model with the image's transformers failed: ModuleNotFoundError" in result["msg"]


def test_the_configured_models_config_json_is_read_and_a_broken_one_named(tmp_path, run_module):
    (tmp_path / "config.json").write_text('{"model_type": "llama", "hidden_size": 4096}')
    result, failed = run_module(module, {"path": str(tmp_path / "s"), "model_args": ARGS,
                                         "config_file": str(tmp_path / "config.json")}, check_mode=True)
    assert not failed and result["model_type"] == "llama" and result["config_from"].endswith("config.json")
    (tmp_path / "config.json").write_text("[1]")
    result, failed = run_module(module, {"path": str(tmp_path / "s"), "model_args": ARGS,
                                         "config_file": str(tmp_path / "config.json")})
    assert failed and "config_file" in result["msg"] and "not a JSON object" in result["msg"]


def test_a_failed_scratch_is_moved_aside_and_named(tmp_path, run_module):
    scratch = tmp_path / "smoke"
    scratch.mkdir()
    result, failed = run_module(module, {"path": str(scratch), "state": "aside"})
    assert not failed and not result["changed"] and result["moved_to"] is None, "no marker: not ours to move"
    (scratch / module.MARKER).write_text("")
    (scratch / "convert.log").write_text("ModuleNotFoundError: No module named 'pydantic'\n")
    result, failed = run_module(module, {"path": str(scratch), "state": "aside"}, check_mode=True)
    assert not failed and result["moved_to"].startswith(str(scratch) + ".failed-") and scratch.exists()
    result, failed = run_module(module, {"path": str(scratch), "state": "aside"})
    assert not failed and result["changed"] and not scratch.exists()
    assert open(os.path.join(result["moved_to"], "convert.log")).read().startswith("ModuleNotFoundError")
    result, failed = run_module(module, {"path": str(scratch), "state": "aside"})
    assert not failed and not result["changed"] and result["moved_to"] is None
