#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
# Documentation only: the work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: controller_files
short_description: Write a node's rendered files into a directory on the controller
version_added: "0.1.0"
description:
  - Writes each file atomically when its content or mode differs, shows the difference under C(--diff), and
    changes nothing under C(--check). Runs on the controller without executing a module, so rendering the run
    files of a whole fleet for review costs no remote or local module call.
options:
  dest:
    description: Absolute directory on the controller; created when missing.
    type: path
    required: true
  files:
    description: "The files, each C({name, content, mode}); instead of C(name), a C(path) whose base name is used."
    type: list
    elements: dict
    required: true
  root:
    description: A file whose C(path) is under O(root) keeps its path relative to it (for example
      C(.mtslime/job/plan.py))
      instead of its base name.
    type: path
  dir_mode:
    description: Mode of O(dest) (and of a subdirectory) when it is created.
    type: str
    default: "0750"
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
extends_documentation_fragment:
  - mtslime.posttrain.attributes
  - mtslime.posttrain.attributes.CONTROLLER_ACTION
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Keep review copies of the run files
  mtslime.posttrain.controller_files:
    dest: "{{ playbook_dir }}/rendered/{{ inventory_hostname }}"
    files:
      - name: hostfile
        content: "10.0.0.1 slots=8\n"
        mode: "0640"
"""

RETURN = r"""
files:
  description: The files written (or, under check mode, that would be).
  returned: always
  type: list
  elements: str
actions:
  description: What was done.
  returned: always
  type: list
  elements: str
"""
