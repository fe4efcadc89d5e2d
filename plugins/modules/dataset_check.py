#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: dataset_check
short_description: Check the training and eval files a slime run will read (Parquet and JSONL)
version_added: "0.1.0"
description:
  - Checks every file that slime's C(--prompt-data) / C(--eval-prompt-data) will read, the way slime reads it
    (C(slime/utils/data.py)) - C(.parquet) and C(.jsonl), with an optional C(@[start:end]) row slice after the path.
  - "Per file: it is readable; it has the input key (C(--input-key)) and, when set, the label key (C(--label-key));
    it has at least O(min_rows) rows; every prompt is a non-empty string or a non-empty list of C({role, content})
    messages with string content; every label has the shape the reward type (C(--rm-type)) needs."
  - "Label shapes: for C(zero2one), C(math), C(dapo), C(deepscaler), C(f1), C(gpqa) and their C(boxed_) variants a
    dict label (the verl C(reward_model) column) must hold a non-empty C(ground_truth), and a scalar label must be a
    non-empty string or a number. C(deepscaler) asserts that the label is a str, int or float, so a dict label is
    an error there (use C(--label-key label) with a scalar column). For C(remote_rm), C(random), C(ifbench) and
    unknown types the label column only has to exist."
  - Reads only the input and label columns (Parquet row groups in batches; row counts and column names come from
    the Parquet footer) and streams JSONL line by line, so a large file with big extra columns is cheap to check.
  - When anything is wrong it fails with one message that lists every problem, each naming the file, the column
    or row, and the fix.
  - Parquet needs pyarrow in the Python that runs the module (the training container's); JSONL needs nothing.
options:
  files:
    description:
      - The files to check. Each item is a path, or a dict with C(path) (required) and optionally C(role)
        (free text, for example C(train) or C(eval), returned as is), and per-file C(input_key), C(label_key),
        C(reward_type) and C(min_rows) that override the module options for that file (slime's
        C(--eval-input-key) / C(--eval-label-key) and an eval config can differ from the training keys).
      - A path may end with slime's row slice C(@[start:end]); the slice is applied before counting rows.
    type: list
    elements: raw
    required: true
  input_key:
    description: Column that holds the prompt (slime's C(--input-key)).
    type: str
    default: prompt
  label_key:
    description: Column that holds the label (slime's C(--label-key)). Empty means the run uses no label.
    type: str
    default: reward_model
  reward_type:
    description: The reward type (slime's C(--rm-type)); decides what shape a label must have.
    type: str
    default: zero2one
  min_rows:
    description: Fewest rows a file may have.
    type: int
    default: 1
  fingerprint:
    description: Return the sha256 of each file's content (reads each file once more, whole).
    type: bool
    default: true
extends_documentation_fragment:
  - mtslime.posttrain.attributes
  - mtslime.posttrain.attributes.INFO_MODULE
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Check the training set and the eval sets of the guide's run
  mtslime.posttrain.dataset_check:
    files:
      - {path: /data/models/data/amt_math17k_d_qweninstruct.parquet, role: train}
      - {path: /data/models/data/aime_2024.parquet, role: eval}
      - {path: /data/models/data/aime_2025.parquet, role: eval}
    input_key: prompt
    label_key: reward_model
    reward_type: zero2one
  register: data_check

- name: slime's upstream example data (JSONL with a scalar label)
  mtslime.posttrain.dataset_check:
    files:
      - /root/dapo-math-17k/dapo-math-17k.jsonl
      - /root/aime-2024/aime-2024.jsonl@[0:30]
    label_key: label
    reward_type: deepscaler
    fingerprint: false
"""

RETURN = r"""
files:
  description: One entry per file, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The path as given (with its row slice, if any).
      type: str
    file:
      description: The file that was read (the path without the row slice).
      type: str
    role:
      description: The C(role) given for the file, or null.
      type: str
    format:
      description: C(parquet) or C(jsonl) (null for an unsupported name).
      type: str
    rows:
      description: Rows slime will read (after the row slice); null when the file could not be read.
      type: int
    total_rows:
      description: Rows in the whole file.
      type: int
    columns:
      description: All column names (Parquet schema; for JSONL the keys of all rows, in order of first appearance).
      type: list
      elements: str
    bytes:
      description: File size.
      type: int
    fingerprint:
      description: sha256 of the file content (null when O(fingerprint=false) or unreadable).
      type: str
    input_key:
      description: Input column checked for this file.
      type: str
    label_key:
      description: Label column checked for this file (null when none).
      type: str
    reward_type:
      description: Reward type the labels were checked against.
      type: str
totals:
  description: C(files), C(rows) and C(bytes) summed over the files.
  returned: always
  type: dict
  sample: {files: 3, rows: 17458, bytes: 48211021}
problems:
  description: Every problem found, one sentence each with the file and the fix (empty on success).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import dataset_check_task


def main():
    dataset_check_task.main(AnsibleModule(**dataset_check_task.module_kwargs()))


if __name__ == "__main__":
    main()
