#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: mcore_checkpoint
short_description: Report whether a Megatron torch_dist checkpoint directory is complete, absent or interrupted
version_added: "0.1.0"
description:
  - Inspects a torch_dist checkpoint directory, either the output of slime's
    C(tools/convert_hf_to_torch_dist.py) (a C(release) checkpoint) or a training C(--save) directory
    (C(iter_XXXXXXX/) checkpoints), and tells whether it is C(complete), C(absent) or C(interrupted).
  - An interrupted directory comes with a signature naming what is wrong, for example C(iter_dir_not_renamed)
    (the converter died before renaming C(iter_0000001/) to C(release/)) or C(nested_release)
    (the converter was rerun into a directory that already had C(release/)).
  - A checkpoint directory (C(release/) or C(iter_XXXXXXX/)) is complete when its C(.metadata) (torch DCP's metadata,
    read without torch and without running anything from it) and C(metadata.json) are non-empty and parse, and every
    shard file that C(.metadata) names exists and is at least as long as the byte ranges C(.metadata) records for it.
    The weights are never read.
  - A conversion is complete when C(latest_checkpointed_iteration.txt) says C(release), C(release/) is complete, and
    neither C(iter_0000001/) nor C(release/iter_0000001/) exists. A training directory is complete when the iteration
    the tracker names is complete. A 0-byte tracker counts as no tracker.
  - Where a training job resumes after a damaged save is decided by the resume rule
    (C(module_utils/checkpoint/resume.py)), which M(mtslime.posttrain.ray_job) applies; this module only reports.
  - Optionally records, or compares with, the fingerprint of the Hugging Face model a conversion came from
    (file C(<path>/.mtslime_conversion.json)), moves an interrupted or stale directory aside to
    C(<path>.<state>-<YYYYmmddTHHMMSSZ>) (UTC; never deletes), or fails on chosen states.
options:
  path:
    description: The checkpoint directory (the C(--save) of the conversion or of training).
    type: path
    required: true
  expect:
    description:
      - C(release) for a conversion output, C(training) for a training save directory (a C(release) tracker is
        accepted too), C(auto) to infer it (a C(rollout/) directory or iterations other than 1 mean training).
    type: str
    choices: [release, training, auto]
    default: auto
  fingerprint:
    description:
      - Fingerprint of the Hugging Face model the conversion should come from. It is compared with the one recorded in
        C(<path>/.mtslime_conversion.json); the result is RV(fingerprint_matches).
      - A complete directory whose recorded fingerprint differs is C(stale) for O(move_aside_if) and O(fail_on).
    type: str
  record_fingerprint:
    description:
      - Write C(<path>/.mtslime_conversion.json) with this fingerprint, the time and O(record_extra), after a
        successful conversion.
      - The directory must be complete. Nothing is written when the same fingerprint and extra data are already
        recorded.
    type: str
  record_extra:
    description: >-
      Additional data stored in the record with O(record_fingerprint) (for example the HF path and the converter
      command).
    type: dict
  move_aside_if:
    description:
      - States that make the module rename the directory to C(<path>.<state>-<YYYYmmddTHHMMSSZ>) (with C(.1), C(.2)...
        when that name is taken).
      - C(stale) means complete but converted from another model (needs O(fingerprint)).
      - Cannot be combined with O(record_fingerprint).
    type: list
    elements: str
    choices: [interrupted, stale, complete]
    default: []
  fail_on:
    description:
      - States that make the module fail, with a message that names the path, the signature and the fix.
      - Checked before anything is moved or written; a failing run changes nothing.
    type: list
    elements: str
    choices: [absent, interrupted, stale, complete]
    default: []
extends_documentation_fragment:
  - mtslime.posttrain.attributes
attributes:
  check_mode:
    support: full
    details:
      - Predicts RV(moved_to) and whether the record would be written, and changes nothing.
  diff_mode:
    support: full
  idempotent:
    support: full
    details:
      - A second run finds the directory already moved aside (then C(absent)) or the fingerprint already recorded.
seealso:
  - module: mtslime.posttrain.convert_patch
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Fingerprint the Hugging Face model the conversion reads
  mtslime.posttrain.hf_model_check:
    path: "{{ slime_hf_model_dir }}"
    model_args: "{{ slime_model_args }}"
  register: __hf_model

- name: Move an interrupted or stale conversion aside before converting
  mtslime.posttrain.mcore_checkpoint:
    path: /data/LLMs/MCORE/Qwen3-8B_slime
    expect: release
    fingerprint: "{{ __hf_model.fingerprint }}"
    move_aside_if: [interrupted, stale]
  register: __convert_before

- name: Record which model the finished conversion came from
  mtslime.posttrain.mcore_checkpoint:
    path: /data/LLMs/MCORE/Qwen3-8B_slime
    expect: release
    record_fingerprint: "{{ __hf_model.fingerprint }}"
    record_extra:
      hf_checkpoint: /data/models/Qwen3-8B

- name: Refuse to train without a complete conversion
  mtslime.posttrain.mcore_checkpoint:
    path: /data/LLMs/MCORE/Qwen3-8B_slime
    expect: release
    fail_on: [absent, interrupted]

- name: Where would training resume?
  mtslime.posttrain.mcore_checkpoint:
    path: /tmp/Qwen3-8B_slime
    expect: training
  register: __train_ckpt
"""

RETURN = r"""
path:
  description: Absolute path inspected.
  returned: always
  type: str
state:
  description: C(complete), C(absent) or C(interrupted), as found (before any move).
  returned: always
  type: str
  sample: interrupted
state_after:
  description: State of O(path) when the module ends (C(absent) after a move aside, or in check mode, would be).
  returned: always
  type: str
kind:
  description: C(release) (conversion output) or C(training) (training save directory); O(expect) or what was inferred.
  returned: always
  type: str
signature:
  description: What is wrong with an interrupted directory; null when complete or absent.
  returned: always
  type: dict
  contains:
    code:
      description: >-
        One of C(not_a_directory), C(empty_dir), C(no_tracker) (also a 0-byte tracker), C(tracker_unreadable),
        C(iter_dir_not_renamed), C(release_dir_missing), C(missing_metadata_json) (C(.metadata) or C(metadata.json)
        missing, empty or unparsable), C(torn_shards) (a shard that C(.metadata) names is missing or shorter than its
        byte ranges), C(nested_release), C(tracker_points_to_missing_iter).
      type: str
    detail:
      description: One sentence saying what was found.
      type: str
  sample: {"code": "iter_dir_not_renamed", "detail": "the tracker says 1 and iter_0000001/ was not renamed to release/"}
message:
  description: One sentence for people, with the fix when something is wrong.
  returned: always
  type: str
tracker:
  description: >-
    Content of C(latest_checkpointed_iteration.txt), whitespace stripped, or null when there is none or it is empty.
  returned: always
  type: str
tracker_empty:
  description: Whether the tracker file exists but is empty (a kill while Megatron wrote it); it counts as no tracker.
  returned: always
  type: bool
iterations:
  description: Iterations that have an C(iter_XXXXXXX/) directory, sorted.
  returned: always
  type: list
  elements: int
complete_iterations:
  description: Iterations whose directory is complete (metadata files non-empty and parsing, no shard missing or short).
  returned: always
  type: list
  elements: int
incomplete_iterations:
  description: Iterations whose directory is not complete.
  returned: always
  type: list
  elements: int
iteration_problems:
  description: For each incomplete iteration (as a string key), what is wrong with it.
  returned: always
  type: dict
  sample: {"42": ["__3_1.distcp is 5 bytes, .metadata records 2838 bytes in it"]}
latest_iteration:
  description: The tracker as a number (0 for C(release)), null without a readable tracker.
  returned: always
  type: int
resume_iteration:
  description: >-
    The iteration a resume of this training save directory loads, by the resume rule (C(checkpoint/resume.py)
    C(resume_point): the newest complete iteration with slime's data cursor, else the newest complete one); null
    when the job would start from the converted checkpoint, and for a C(release) directory.
  returned: always
  type: int
release:
  description: Whether a complete C(release/) directory exists.
  returned: always
  type: bool
dataset_state:
  description: >-
    Whether C(rollout/global_dataset_state_dict_<latest_iteration>.pt) (slime's data cursor) exists and is not empty.
  returned: always
  type: bool
dataset_state_file:
  description: The data cursor file for the tracker's iteration, null unless the tracker is a number.
  returned: always
  type: str
dataset_state_iterations:
  description: Iterations that have a non-empty C(rollout/global_dataset_state_dict_<N>.pt).
  returned: always
  type: list
  elements: int
record_file:
  description: Path of the conversion record C(<path>/.mtslime_conversion.json).
  returned: always
  type: str
record:
  description: Content of the conversion record after the module ran (or would have run), null if there is none.
  returned: always
  type: dict
fingerprint_recorded:
  description: Fingerprint in the conversion record, null when there is no record.
  returned: always
  type: str
fingerprint_matches:
  description: >-
    Whether the recorded fingerprint equals O(fingerprint); null when O(fingerprint) is not set or nothing is
    recorded.
  returned: always
  type: bool
moved_to:
  description: Where the directory was (or in check mode would be) moved; null when it was not moved.
  returned: always
  type: str
actions:
  description: What was done or, in check mode, would be done.
  returned: always
  type: list
  elements: str
diff:
  description: Before/after of the record file or of the directory's location.
  returned: when changed
  type: dict
"""

from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import mcore_checkpoint_task


def main():
    mcore_checkpoint_task.main(mcore_checkpoint_task.CheckpointModule(**mcore_checkpoint_task.module_kwargs()))


if __name__ == "__main__":
    main()
