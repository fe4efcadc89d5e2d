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
  - Anchors are found from the Python syntax tree, not line numbers, so the module handles the Moore Threads fork that
    the guide's diff targets (C(import json), C(device_id=None if accelerator.is_musa_available() else ...)),
    upstream HEAD (C(backend=accelerator.process_group_backend()), C(device_id=accelerator.distributed_device_id(...)),
    to which the guide's diff applies only with fuzz) and the tagged releases' C(backend="nccl").
  - When an anchor is missing (the patch target changed upstream) it fails, changes nothing, says what the file has
    instead and how to go on.
  - The new text must compile before it replaces the file; the file is replaced atomically and keeps its mode.
options:
  path:
    description: The converter script.
    type: path
    default: /home/slime/tools/convert_hf_to_torch_dist.py
  musa_patch_path:
    description: Default of C(MUSA_PATCH_PATH) written into the block (the megatron-lm-musa-patch checkout in the
      container).
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
  - mtslime.posttrain contributors (!UNKNOWN)
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
    Which form the file's init_process_group backend had (for an already patched file, what the trailing comment
    says it had): C(accelerator) (the MT fork and upstream HEAD, C(accelerator.process_group_backend())), C(nccl)
    (tags up to v0.3.1, C(backend="nccl")) or C(other).
  returned: always
  type: str
  sample: accelerator
backup_file:
  description: Path of the backup of the unpatched file when it exists (or, in check mode, would be created); null
    otherwise.
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

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import atomic_write, read_text, text_diff
from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint.converter_patch import (
    BLOCK_VAR,
    AnchorError,
    analyse,
    backend_form,
    build,
    is_patched,
    short,
)

MODULE = "mtslime.posttrain.convert_patch"


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
    backup_file = backup_path if os.path.exists(backup_path) else None
    result = dict(changed=False, path=path, backup_file=backup_file, actions=[])
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
            msg="%s: the patch target changed upstream: %s; nothing was changed. Fix: patch %s by hand as the guide's "
            "§3.2 diff shows (a file patched that way is recognised and left alone), or use a slime checkout whose "
            "converter has these anchors (the MT image's /home/slime, upstream v0.3.1 or 624b824a8), then rerun; "
            "or update %s for the new form" % (path, exc, path, MODULE),
            **result
        )
    result.update(form=details["form"], anchors=details["anchors"])
    if details["block_line"] is not None and details["block_line"] > details["anchors"]["torch_import_line"]:
        module.warn(
            "%s sets %s at line %d, after the first torch import at line %d: the MUSA patch path is added too late"
            % (path, BLOCK_VAR, details["block_line"], details["anchors"]["torch_import_line"])
        )
    if not os.path.isdir(params["musa_patch_path"]):
        module.warn(
            "MUSA patch directory %s does not exist on this host: the inserted block will skip it unless "
            "MUSA_PATCH_PATH points elsewhere at run time" % params["musa_patch_path"]
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
                    module.fail_json(
                        msg="cannot write the backup %s: %s; nothing was changed; check permissions or set "
                        "backup=false" % (backup_path, exc),
                        **result
                    )
            result["backup_file"] = backup_path
            result["actions"].append("%sback up the original to %s" % (verb, backup_path))

    if not module.check_mode:
        try:
            atomic_write(path, new_text)
        except OSError as exc:
            module.fail_json(
                msg="cannot write %s: %s; check permissions on %s" % (path, exc, os.path.dirname(path)), **result
            )
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
                msg="the backup %s is not an unpatched converter (it is patched or does not parse); %s was not "
                "restored; "
                "restore it with git checkout in the slime repository" % (backup_path, path),
                **result
            )
        if not module.check_mode:
            try:
                atomic_write(path, original)
            except OSError as exc:
                module.fail_json(
                    msg="cannot write %s: %s; check permissions on %s" % (path, exc, os.path.dirname(path)), **result
                )
        verb = "would " if module.check_mode else ""
        result["actions"].append("%srestore %s from %s (the backup is kept)" % (verb, path, backup_path))
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
