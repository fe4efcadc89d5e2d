# What the image's Python stack has of what slime's conversion and training import, and for each
# missing piece the inventory setting that works around it (or that there is none).
# probe() runs one interpreter per package, so a package that crashes on import (a CUDA
# library that does not load) is reported and does not take the others down.
#
# Standard library only; Python 3.8+.
from __future__ import annotations

import json
import os
import subprocess

PACKAGES = ("torch", "transformer_engine", "apex", "megatron", "sglang", "transformers")
# One package's import, its version, and for torch the devices it sees.
PROBE_SCRIPT = r"""
import importlib, json, sys, time
name = sys.argv[1]
start = time.time()
found = {"name": name}
try:
    module = importlib.import_module(name)
    found.update(ok=True, version=str(getattr(module, "__version__", "") or ""))
    if name == "torch":
        # MUSA first: the MUSA patch aliases torch.cuda to torch.musa, so torch.cuda answers on MUSA nodes too
        device, count = "cpu", 0
        try:
            import torch_musa  # noqa: F401  (registers torch.musa)
        except Exception:
            pass
        musa = getattr(module, "musa", None)
        try:
            if musa is not None and musa.is_available():
                device, count = "musa", musa.device_count()
        except Exception:
            pass
        if device == "cpu":
            try:
                if module.cuda.is_available():
                    device, count = "cuda", module.cuda.device_count()
            except Exception:
                pass
        found.update(device=device, device_count=count)
except BaseException as exc:
    found.update(ok=False, error="%s: %s" % (type(exc).__name__, exc))
found["seconds"] = round(time.time() - start, 2)
print(json.dumps(found))
"""
# Workarounds (flags checked against Megatron's parser, plugins/plugin_utils/training/known_flags.json):
# without Transformer Engine, Megatron's local layer specs and no TE-fused RoPE; without apex, no fused weight
# gradient accumulation (its fused_weight_gradient_mlp_cuda) and no persistent layer norm.
NO_TE_FLAGS = ["--transformer-impl", "local", "--no-rope-fusion", "--no-bias-swiglu-fusion"]
NO_APEX_FLAGS = ["--no-gradient-accumulation-fusion", "--no-persist-layer-norm"]


def probe_one(python, name, env, timeout):
    try:
        done = subprocess.run([python, "-c", PROBE_SCRIPT, name], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"name": name, "ok": False, "error": "import did not finish in %d s" % timeout}
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return {"name": name, "ok": False,
                "error": "the import ended the interpreter (rc %d): %s" % (done.returncode, tail[-1] if tail else "")}


def probe(python, python_path, extra_env=None, timeout=120, packages=PACKAGES):
    """{package: {ok, version | error, seconds[, device, device_count]}} as `python` with `python_path`
    in front of PYTHONPATH (the converter's: slime and Megatron) sees them."""
    env = converter_env(python_path, extra_env)
    return {name: probe_one(python, name, env, timeout) for name in packages}


def converter_env(python_path, extra_env=None):
    """This process's environment with `extra_env` and `python_path` in front of PYTHONPATH: what the converter
    sees (slime and Megatron first)."""
    env = dict(os.environ)
    env.update(extra_env or {})
    paths = [p for p in python_path if p] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def lacks(stack, accelerator):
    """What the stack lacks, each {what, why, fix}: fix names the inventory setting that works around it, or
    says there is none."""
    def missing(name):
        return not (stack.get(name) or {}).get("ok")

    def error(name):
        return (stack.get(name) or {}).get("error") or "not probed"

    found = []
    if missing("torch"):
        found.append({"what": "torch", "why": error("torch"),
                      "fix": "none in the inventory: the image (container_image) must carry torch"})
    elif (stack["torch"].get("device") or "cpu") == "cpu":
        found.append({"what": "torch device",
                      "why": "torch sees no %s device" % ("MUSA" if accelerator == "musa" else "CUDA"),
                      "fix": "none in the inventory: check the driver on the node and the container's device flags "
                             "(container_privileged, container_extra_args)"})
    if missing("megatron"):
        found.append({"what": "megatron", "why": error("megatron"),
                      "fix": "set slime_megatron_dir to the Megatron-LM checkout in the image"})
    if missing("transformer_engine"):
        found.append({"what": "transformer_engine", "why": error("transformer_engine"),
                      "fix": "convert_extra_args: %s (keep --use-cpu-initialization), and the same flags in "
                             "slime_train_args_overrides for training" % json.dumps(NO_TE_FLAGS)})
    if missing("apex"):
        found.append({"what": "apex", "why": error("apex"),
                      "fix": "add %s to convert_extra_args and slime_train_args_overrides" % json.dumps(NO_APEX_FLAGS)})
    if missing("sglang"):
        found.append({"what": "sglang", "why": error("sglang"),
                      "fix": "none in the inventory: training needs SGLang for its rollouts; use an image with it"})
    if missing("transformers"):
        found.append({"what": "transformers", "why": error("transformers"),
                      "fix": "none in the inventory: the conversion and the smoke model need transformers"})
    return found


def advice(lacking):
    """One line per missing piece: `apex: ModuleNotFoundError: No module named 'apex' -> add [...] to ...`."""
    return ["%s: %s -> %s" % (item["what"], item["why"], item["fix"]) for item in lacking]


def summary(stack):
    """One line: `torch 2.11.0+cu130 (cuda x8), transformer_engine missing, ...`."""
    parts = []
    for name in PACKAGES:
        item = stack.get(name)
        if not item:
            continue
        if not item.get("ok"):
            parts.append("%s missing" % name)
            continue
        text = "%s %s" % (name, item.get("version") or "(no version)")
        if name == "torch":
            text += " (%s x%d)" % (item.get("device"), item.get("device_count") or 0)
        parts.append(text)
    return ", ".join(parts)
