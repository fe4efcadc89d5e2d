#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: smoke_model
short_description: Write a 2-layer model of the configured architecture for a smoke conversion, and probe the stack
version_added: "0.1.0"
description:
  - The first half of the smoke run (role C(mtslime.posttrain.smoke)). In a scratch directory of its own, writes a
    small Hugging Face model of the configured model's architecture family (C(config.json) of O(config_file) when it
    exists, else from O(model_args)) with O(num_layers) layers and small dimensions, using the image's
    C(transformers) and C(tokenizers) (C(config.json), C(model.safetensors), the tokenizer files), and returns the
    C(MODEL_ARGS) that describe it for the converter.
  - Probes, one interpreter each, the imports slime's conversion and training need (C(torch) and the device it
    sees, C(transformer_engine), C(apex), C(megatron), C(sglang), C(transformers)) and says for each missing piece
    which inventory setting works around it.
  - The scratch directory is the module's own; it must be absent or hold the marker C(.mtslime-smoke) of an
    earlier smoke run (then it is emptied); any other directory there is refused and left alone.
  - O(state=aside) moves the scratch directory aside as C(<path>.failed-<UTC time>) (never deleted) and returns
    where; a directory without the marker is not a smoke run's and is left where it is.
options:
  path:
    description: The scratch directory (the small model goes into C(<path>/hf)).
    type: path
    required: true
  state:
    description:
      - C(present) probes the stack and writes the small model.
      - C(aside) moves O(path) aside after a failed smoke run.
    type: str
    choices: [present, aside]
    default: present
  model_args:
    description: The configured model's C(MODEL_ARGS) (C(slime_model_args)); required with O(state=present).
    type: dict
  config_file:
    description: The configured model's C(config.json); used when it exists (its architecture and settings).
    type: path
  num_layers:
    description: Layers of the small model (the converter needs at least as many layers as processes).
    type: int
    default: 2
  python_path:
    description: Directories put in front of C(PYTHONPATH) for the probe (slime and Megatron, as the converter has).
    type: list
    elements: path
    default: []
  probe_env:
    description: More environment for the probe (for example C(MUSA_PATCH_PATH)).
    type: dict
    default: {}
  accelerator:
    description: The node's C(slime_accelerator) (C(musa), C(cuda)), to name the device torch should see.
    type: str
    default: musa
  reason:
    description: The move-aside reason with O(state=aside).
    type: str
    default: failed
extends_documentation_fragment:
  - mtslime.posttrain.attributes
attributes:
  check_mode:
    support: full
    details:
      - Probes the stack and returns the small model's C(MODEL_ARGS) and config; writes and moves nothing.
  diff_mode:
    support: none
  idempotent:
    support: partial
    details:
      - O(state=present) writes the scratch directory anew on every run and reports C(changed=false), as nothing but its
        own scratch changes on the node. O(state=aside) reports C(changed=true) when it moved the directory.
seealso:
  - module: mtslime.posttrain.mcore_checkpoint
  - module: mtslime.posttrain.hf_model_check
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Write the 2-layer model and probe the stack
  mtslime.posttrain.smoke_model:
    path: /tmp/mtslime-smoke
    model_args: "{{ slime_model_args }}"
    config_file: /data/models/Qwen3-8B/config.json
    python_path: [/home/slime, /home/Megatron-LM]
  register: smoke

- name: Keep a failed smoke run's scratch for a look
  mtslime.posttrain.smoke_model:
    path: /tmp/mtslime-smoke
    state: aside
"""

RETURN = r"""
hf_dir:
  description: The small Hugging Face model.
  returned: state=present
  type: str
model_args:
  description: C(MODEL_ARGS) of the small model (the configured ones with its layers and dimensions).
  returned: state=present
  type: dict
model_type:
  description: The architecture family (C(model_type) of C(config.json)).
  returned: state=present
  type: str
  sample: qwen3
config_from:
  description: O(config_file) when it was read, else C(model_args).
  returned: state=present
  type: str
config:
  description: The small model's C(config.json) as written (or, in check mode, as it would be).
  returned: state=present
  type: dict
files:
  description: The files written into RV(hf_dir).
  returned: state=present, not in check mode
  type: list
  elements: str
stack:
  description: Per package C(ok), C(version) or C(error), C(seconds); for torch also C(device) and C(device_count).
  returned: state=present
  type: dict
stack_summary:
  description: The stack in one line.
  returned: state=present
  type: str
  sample: torch 2.11.0+cu130 (cuda x8), transformer_engine missing, apex missing, megatron 0.14.0
lacks:
  description: Each missing piece as C(what), C(why) and C(fix) (the inventory setting that works around it).
  returned: state=present
  type: list
  elements: dict
advice:
  description: "RV(lacks) as lines, C(<what>: <why> -> <fix>)."
  returned: state=present
  type: list
  elements: str
  sample: ["apex: ModuleNotFoundError: No module named 'apex' -> add [...] to convert_extra_args and ..."]
moved_to:
  description: Where the scratch directory was moved (null when it did not exist or is not a smoke run's).
  returned: state=aside
  type: str
"""

import json
import os
import shutil
import sys

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts.aside import aside_name, move_aside
from ansible_collections.mtslime.posttrain.plugins.module_utils.smoke import stack as smoke_stack
from ansible_collections.mtslime.posttrain.plugins.module_utils.smoke import tiny_model

MARKER = ".mtslime-smoke"


def read_base_config(path):
    """config.json of the configured model, or None when there is none (the model stage has not run yet)."""
    if not path or not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as handle:
        config = json.load(handle)
    if not isinstance(config, dict):
        raise ValueError("%s holds %s, not a JSON object" % (path, type(config).__name__))
    return config


def fresh_scratch(path):
    """Empties the scratch directory of an earlier smoke run; refuses a directory that is not one."""
    if os.path.lexists(path):
        if not os.path.isfile(os.path.join(path, MARKER)):
            raise ValueError("%s exists and is not a smoke run's scratch directory (no %s in it); set smoke_dir to "
                             "a path of its own, or move it away" % (path, MARKER))
        shutil.rmtree(path)
    os.makedirs(path)
    with open(os.path.join(path, MARKER), "w") as handle:
        handle.write("scratch directory of mtslime.posttrain's smoke run; removed by the next one\n")


def aside(module, path, reason):
    if not os.path.lexists(path):
        module.exit_json(changed=False, moved_to=None)
    if not os.path.isfile(os.path.join(path, MARKER)):  # not a smoke run's own scratch: not ours to move
        module.exit_json(changed=False, moved_to=None)
    if module.check_mode:
        module.exit_json(changed=True, moved_to=aside_name(path, reason))
    module.exit_json(changed=True, moved_to=move_aside(path, reason))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", choices=["present", "aside"], default="present"),
            model_args=dict(type="dict"),
            config_file=dict(type="path"),
            num_layers=dict(type="int", default=2),
            python_path=dict(type="list", elements="path", default=[]),
            probe_env=dict(type="dict", default={}),
            accelerator=dict(type="str", default="musa"),
            reason=dict(type="str", default="failed"),
        ),
        required_if=[("state", "present", ["model_args"])],
        supports_check_mode=True,
    )
    params = module.params
    path = params["path"]
    if params["state"] == "aside":
        aside(module, path, params["reason"])
    try:
        base = read_base_config(params["config_file"])
    except (OSError, ValueError) as exc:
        module.fail_json(msg="config_file %s cannot be read (%s): fix or remove it (the model stage writes it)"
                         % (params["config_file"], exc))
    try:
        args = tiny_model.smoke_model_args(params["model_args"], params["num_layers"])
        kind, config = tiny_model.hf_config(args, base)
    except (TypeError, ValueError) as exc:
        module.fail_json(msg="cannot make the smoke model: %s" % exc)
    probe_env = {str(k): str(v) for k, v in params["probe_env"].items()}
    stack = smoke_stack.probe(sys.executable, params["python_path"], probe_env)
    result = dict(
        changed=False, hf_dir=os.path.join(path, "hf"), model_args=args, model_type=kind, config=config,
        config_from=params["config_file"] if base is not None else "model_args", stack=stack,
        stack_summary=smoke_stack.summary(stack), lacks=smoke_stack.lacks(stack, params["accelerator"]),
    )
    result["advice"] = smoke_stack.advice(result["lacks"])
    if module.check_mode:
        module.exit_json(**result)
    try:
        fresh_scratch(path)
    except (OSError, ValueError) as exc:
        module.fail_json(msg="smoke_dir: %s" % exc, **result)
    try:
        result["files"] = tiny_model.write_model(
            result["hf_dir"], kind, config, sys.executable, smoke_stack.converter_env(params["python_path"], probe_env))
    except (tiny_model.WriteError, OSError, ValueError) as exc:
        module.fail_json(msg="writing the %s model with the image's transformers failed: %s" % (kind, exc), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
