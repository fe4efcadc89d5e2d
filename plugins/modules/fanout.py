#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: fanout
short_description: Spread one artifact over the fleet node to node, verified piece by piece, resumable
version_added: "0.1.0"
description:
  - One node's part in spreading an artifact (the Hugging Face model directory, the data archive, a C(docker save)
    archive, the converted checkpoint) that one storage already holds and verified to the storages that lack it.
  - C(state=manifest) describes the artifact on the seed, the file sizes and the SHA-256 of every piece, and
    records it next to the artifact in C(<path>.fanout.json) (reused while the files keep their sizes and times).
  - C(state=probe) tells whether this node's copy is the one a manifest describes (its record names the manifest and
    its files are unchanged), and how many pieces a cut earlier run left in C(<path>.fanout-partial).
  - C(state=spread) serves the pieces this node holds (HTTP bound to O(bind) only, bearer O(token), stopped when its
    children are done or idle) and, as a puller, fetches the missing pieces from O(upstreams), nearest first. Every
    piece is checked against the manifest before it is written or served; an upstream that sends a piece that does
    not verify is not used again. The copy is moved into place only when complete; a different O(path) already
    there is moved aside (C(<path>.replaced-<UTC time>)), never deleted. A cut run is resumed by the next one.
  - Run it with C(async) and C(poll=0) on every node of the plan at once (M(mtslime.posttrain.async_progress) shows
    the progress lines of O(log_file)); the plan comes from the C(mtslime.posttrain.fanout_plan) filter.
options:
  state:
    description: What to do.
    type: str
    choices: [manifest, probe, spread]
    default: spread
  path:
    description: The artifact, a directory or a file (for the seed its source; for a puller where it is put).
    type: path
    required: true
  piece_size:
    description: Bytes per piece (C(state=manifest)).
    type: int
    default: 4194304
  manifest:
    description: The seed's manifest (the C(manifest) returned by C(state=manifest)); required for probe and spread.
    type: dict
  name:
    description: This node's name in the plan (its storage); sent to its upstreams when it is done.
    type: str
  role:
    description: C(seed) serves a complete copy at O(path); C(pull) fetches into O(path) and serves what it holds.
    type: str
    choices: [seed, pull]
  bind:
    description: The node's fleet address; the server listens there only.
    type: str
  port:
    description: The server's TCP port.
    type: int
    default: 8765
  token:
    description: Bearer token every request must carry (one per run, shared by the nodes of the plan).
    type: str
  upstreams:
    description: Where a puller fetches from, nearest first, C({name, url}).
    type: list
    elements: dict
    default: []
  children:
    description: The nodes that pull from this one; the server stops once they are all done.
    type: list
    elements: str
    default: []
  log_file:
    description: Progress lines (bytes, rate, upstream) are appended here at least every O(progress_interval) s.
    type: path
  progress_file:
    description: The last progress record, as JSON.
    type: path
  progress_interval:
    description: Seconds between progress lines.
    type: int
    default: 30
  idle_timeout:
    description: A complete server stops after this many seconds without a request (a child that died).
    type: int
    default: 300
  stall_timeout:
    description: A puller fails when no upstream has given a piece for this many seconds; a rerun resumes it.
    type: int
    default: 300
  deadline:
    description: Longest the whole spread may take on this node (s).
    type: int
    default: 86400
extends_documentation_fragment:
  - mtslime.posttrain.attributes
attributes:
  check_mode:
    support: full
    details: C(manifest) and C(probe) only read (no record is written); C(spread) returns what it would do.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: A node whose copy is recorded with the manifest's id is reported unchanged by C(probe).
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Describe the model on the seed
  mtslime.posttrain.fanout:
    state: manifest
    path: /data/models/Qwen3-8B
  register: seed_manifest

- name: Spread it (every node of the plan at once)
  mtslime.posttrain.fanout:
    path: /data/models/Qwen3-8B
    manifest: "{{ seed_manifest.manifest }}"
    name: gpu-02
    role: pull
    bind: 10.20.0.12
    token: "{{ _fanout_token }}"  # one random token per run (playbooks/plays/tasks/fanout_artifact.yml)
    upstreams: [{name: gpu-01, url: "http://10.20.0.11:8765"}]
    children: [gpu-03]
    log_file: /data/mtslime/fanout-Qwen3-8B.log
  async: 86400
  poll: 0
"""

RETURN = r"""
manifest:
  description: The manifest (C(state=manifest)); C(id) is the SHA-256 of its files and pieces.
  returned: state=manifest
  type: dict
id:
  description: The manifest's id.
  returned: always
  type: str
total:
  description: The artifact's size in bytes.
  returned: always
  type: int
holds:
  description: Whether this node's copy is the one the manifest describes (C(state=probe)).
  returned: state=probe
  type: bool
partial_pieces:
  description: Pieces a cut earlier run left in C(<path>.fanout-partial) (not yet re-checked).
  returned: state=probe
  type: int
received:
  description: Bytes fetched by this node in this run (C(state=spread)).
  returned: state=spread
  type: int
served:
  description: Bytes this node served to its children.
  returned: state=spread
  type: int
resumed_pieces:
  description: Pieces of a cut earlier run that still verified and were kept.
  returned: state=spread
  type: int
refused:
  description: Upstreams that sent a piece that does not verify (never used again in the run).
  returned: state=spread
  type: list
moved_aside:
  description: Where a different copy that was at O(path) was moved.
  returned: state=spread
  type: str
actions:
  description: What was done, in words.
  returned: always
  type: list
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.fanout import fanout_task


def main():
    fanout_task.main(AnsibleModule(**fanout_task.module_kwargs()))


if __name__ == "__main__":
    main()
