#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: checkpoint_retention
short_description: Keep the newest N complete checkpoints of a training save dir, older ones to a trash dir
version_added: "0.1.0"
description:
  - "Applies the retention rule of C(train_job_keep_checkpoints) to a Megatron torch_dist training save directory
    (C(--save)): it keeps the newest O(keep) complete iterations, the one the tracker
    (C(latest_checkpointed_iteration.txt)) names, the newest complete one, the one a resume would load now, and every
    iteration in O(protect) (what the running job loaded from, also read from O(job_log)). Older complete iterations
    are pruned; incomplete ones are left to the resume rule of M(mtslime.posttrain.ray_job)."
  - "It prunes nothing while a save may be in progress: an iteration directory numbered above the tracker, an iteration
    directory without C(metadata.json) or C(.metadata) newer than the tracker, or a tracker older than the newest
    iteration directory. RV(blocked) then says which."
  - "Pruned iterations are moved (a rename on the same filesystem) to O(trash_dir), default C(<save_dir>.trash), as
    C(<trash_dir>/iter_0000003.pruned-<YYYYmmddTHHMMSSZ>) together with their data cursor
    C(rollout/global_dataset_state_dict_3.pt) (C(<trash_dir>/global_dataset_state_dict_3.pt.pruned-<UTC>)).
    The trash frees no space until you empty it (C(rm -rf <save_dir>.trash) once you no longer want them).
    With O(prune=delete) they are deleted instead."
  - Completeness is M(mtslime.posttrain.mcore_checkpoint)'s (C(metadata.json), C(.metadata) and shards).
options:
  save_dir:
    description: The training save directory (the C(--save) of train.py). A directory that does not exist has nothing
      to prune.
    type: path
    required: true
  keep:
    description: How many of the newest complete iterations to keep (C(train_job_keep_checkpoints)); V(0) keeps every
      one.
    type: int
    required: true
  prune:
    description: V(trash) moves pruned iterations to O(trash_dir); V(delete) deletes them (C(train_job_prune)).
    type: str
    choices: [trash, delete]
    default: trash
  trash_dir:
    description: Where V(trash) moves them; on the save directory's filesystem. Default C(<save_dir>.trash).
    type: path
  protect:
    description: Iterations never pruned, for example the one the running job resumed from (C(resumed_from_iteration)).
    type: list
    elements: int
    default: []
  job_log:
    description: The running job's log; the iteration of its C(successfully loaded checkpoint from <save_dir> ... at
      iteration N) line is protected too.
    type: path
extends_documentation_fragment:
  - mtslime.posttrain.attributes
attributes:
  check_mode:
    support: full
    details:
      - Predicts what would be kept, moved (with the target names) or deleted, and changes nothing.
  diff_mode:
    support: full
    details:
      - The iteration directories before and after.
  idempotent:
    support: partial
    details:
      - A second run prunes nothing, unless the running job saved another checkpoint meanwhile.
seealso:
  - module: mtslime.posttrain.mcore_checkpoint
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Keep the newest 5 checkpoints (older ones to /data/checkpoints/Qwen3-8B_slime.trash)
  mtslime.posttrain.checkpoint_retention:
    save_dir: /data/checkpoints/Qwen3-8B_slime
    keep: 5
    job_log: /home/slime/musa_example/qwen_32b_sherry/logs/qwen3-8B.log

- name: Keep 3 and delete the rest
  mtslime.posttrain.checkpoint_retention:
    save_dir: /data/checkpoints/Qwen3-8B_slime
    keep: 3
    prune: delete
"""

RETURN = r"""
save_dir:
  description: The save directory.
  returned: always
  type: str
kept:
  description: Complete iterations kept.
  returned: always
  type: list
  elements: int
pruned:
  description: Complete iterations moved to the trash or deleted (in check mode, would be).
  returned: always
  type: list
  elements: int
protected:
  description: "Why each kept iteration is kept, C({iteration: [reasons]})."
  returned: always
  type: dict
blocked:
  description: Why nothing was pruned because a save may be in progress; null otherwise.
  returned: always
  type: str
moved:
  description: "C([{path, to}]) for each directory and data-state file moved to the trash."
  returned: always
  type: list
  elements: dict
deleted:
  description: Paths deleted (O(prune=delete)).
  returned: always
  type: list
  elements: str
bytes_pruned:
  description: Size of the pruned iterations.
  returned: always
  type: int
trash_dir:
  description: The trash directory.
  returned: always
  type: str
trash_bytes:
  description: What the trash directory holds after the task (space you get back by emptying it).
  returned: always
  type: int
message:
  description: One sentence for people.
  returned: always
  type: str
actions:
  description: What was done (or would be).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import retention_task


def main():
    retention_task.main(AnsibleModule(**retention_task.module_kwargs()))


if __name__ == "__main__":
    main()
