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

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import aside
from ansible_collections.mtslime.posttrain.plugins.module_utils.fanout import agent as fanout_agent

RECORD_SUFFIX = ".fanout.json"


def signature(path, manifest):
    """(size, mtime) of every file of the manifest at `path`, or None when one is missing or resized."""
    result = {}
    for entry in manifest["files"]:
        full = os.path.join(path, entry["path"]) if entry["path"] else path
        try:
            info = os.stat(full)
        except OSError:
            return None
        if info.st_size != int(entry["size"]):
            return None
        result[entry["path"]] = [info.st_size, int(info.st_mtime)]
    return result


def read_record(path):
    try:
        with open(path.rstrip("/") + RECORD_SUFFIX, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def write_record(path, manifest):
    record = dict(manifest, signature=signature(path, manifest), recorded=time.time())
    target = path.rstrip("/") + RECORD_SUFFIX
    with open(target + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    os.replace(target + ".tmp", target)


def recorded_manifest(path, piece_size=None):
    """The recorded manifest when the files are unchanged since it was written (and of the piece size asked)."""
    record = read_record(path)
    if not record or (piece_size and int(record.get("piece_size", 0)) != piece_size):
        return None
    if record.get("signature") is None or signature(path, record) != record["signature"]:
        return None
    return {k: v for k, v in record.items() if k not in ("signature", "recorded")}


def do_manifest(module, p):
    if not os.path.exists(p["path"]):
        module.fail_json(msg="fanout: the artifact %s does not exist on this node; the seed must hold a checked copy "
                             "(let its role fetch it first)" % p["path"])
    manifest = recorded_manifest(p["path"], p["piece_size"])
    actions = ["reused the record %s%s" % (p["path"].rstrip("/"), RECORD_SUFFIX)] if manifest else []
    if manifest is None:
        try:
            manifest = fanout_agent.build_manifest(p["path"], p["piece_size"])
        except fanout_agent.FanoutError as exc:
            module.fail_json(msg=str(exc))
        actions.append("hashed %d pieces of %s" % (len(manifest["pieces"]), p["path"]))
        if not module.check_mode:
            write_record(p["path"], manifest)
    module.exit_json(changed=False, manifest=manifest, id=manifest["id"], total=manifest["total"], actions=actions)


def do_probe(module, p, manifest):
    current = recorded_manifest(p["path"])
    holds = bool(current and current["id"] == manifest["id"])
    partial = fanout_agent.load_state(p["path"].rstrip("/") + fanout_agent.PARTIAL_SUFFIX, manifest)
    module.exit_json(changed=False, holds=holds, id=manifest["id"], total=manifest["total"],
                     partial_pieces=len(partial),
                     actions=["%s holds the copy of manifest %s" % (p["path"], manifest["id"][:12])] if holds else
                     ["%s lacks it (%d pieces of a cut run kept)" % (p["path"], len(partial))])


def do_spread(module, p, manifest):
    for key in ("name", "role", "bind", "token"):
        if not p[key]:
            module.fail_json(msg="fanout: state=spread needs %s" % key)
    if p["role"] == "pull" and not p["upstreams"]:
        module.fail_json(msg="fanout: a puller needs upstreams (the plan's fanout_plan filter gives them)")
    for upstream in p["upstreams"]:
        if not (isinstance(upstream, dict) and upstream.get("name") and str(upstream.get("url", "")).startswith(
                "http://")):
            module.fail_json(msg="fanout: every upstream is {name, url: http://address:port}, not %r" % (upstream,))
    if module.check_mode:
        module.exit_json(changed=p["role"] == "pull", id=manifest["id"], total=manifest["total"], received=0,
                         served=0, resumed_pieces=0, refused=[], moved_aside=None,
                         actions=["would %s %s (%d bytes)%s" % (
                             "pull" if p["role"] == "pull" else "serve", p["path"], manifest["total"],
                             " from " + ", ".join(u["name"] for u in p["upstreams"]) if p["upstreams"] else "")])
    log = open(p["log_file"], "a", encoding="utf-8") if p["log_file"] else None

    def emit(line):
        if log:
            log.write("%s %s\n" % (time.strftime("%H:%M:%S"), line))
            log.flush()

    config = {"name": p["name"], "manifest": manifest, "token": p["token"], "bind": p["bind"], "port": p["port"],
              "role": p["role"], "src": p["path"], "dest": p["path"], "upstreams": p["upstreams"],
              "children": p["children"], "progress_file": p["progress_file"],
              "progress_interval": p["progress_interval"], "idle_timeout": p["idle_timeout"],
              "stall_timeout": p["stall_timeout"], "deadline": p["deadline"]}
    try:
        result = fanout_agent.run(config, aside=aside.move_aside, emit=emit)
    except fanout_agent.FanoutError as exc:
        module.fail_json(msg=str(exc), id=manifest["id"])
    except OSError as exc:
        module.fail_json(msg="fanout %s: %s (port %d on %s in use, or the disk?)" % (
            p["name"], exc, p["port"], p["bind"]), id=manifest["id"])
    finally:
        if log:
            log.close()
    actions = []
    if p["role"] == "pull":
        write_record(p["path"], manifest)
        actions.append("received %d bytes into %s from %s" % (result["received"], p["path"], ", ".join(
            sorted(result["sources"])) or "-"))
        if result["refused"]:
            actions.append("refused %s: pieces that do not match the manifest" % ", ".join(result["refused"]))
        if result["moved_aside"]:
            actions.append("moved the copy that was there to %s" % result["moved_aside"])
    if result.get("served"):
        actions.append("served %d bytes to %s" % (result["served"], ", ".join(result.get("children_done", [])) or
                                                  "children that did not finish"))
    module.exit_json(changed=p["role"] == "pull", id=manifest["id"], total=manifest["total"],
                     actions=actions, **{k: v for k, v in result.items() if k != "manifest"})


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["manifest", "probe", "spread"], default="spread"),
            path=dict(type="path", required=True),
            piece_size=dict(type="int", default=fanout_agent.PIECE_SIZE),
            manifest=dict(type="dict"),
            name=dict(type="str"),
            role=dict(type="str", choices=["seed", "pull"]),
            bind=dict(type="str"),
            port=dict(type="int", default=8765),
            token=dict(type="str", no_log=True),
            upstreams=dict(type="list", elements="dict", default=[]),
            children=dict(type="list", elements="str", default=[]),
            log_file=dict(type="path"),
            progress_file=dict(type="path"),
            progress_interval=dict(type="int", default=30),
            idle_timeout=dict(type="int", default=300),
            stall_timeout=dict(type="int", default=300),
            deadline=dict(type="int", default=86400),
        ),
        required_if=[("state", "probe", ["manifest"]), ("state", "spread", ["manifest", "role"])],
        supports_check_mode=True,
    )
    p = module.params
    if p["piece_size"] < 4096:
        module.fail_json(msg="fanout: piece_size must be at least 4096 bytes, not %d" % p["piece_size"])
    if p["state"] == "manifest":
        do_manifest(module, p)
    manifest = p["manifest"]
    for key in ("id", "files", "pieces", "piece_size"):
        if key not in manifest:
            module.fail_json(msg="fanout: manifest lacks %s; pass the manifest that state=manifest returned" % key)
    if p["state"] == "probe":
        do_probe(module, p, manifest)
    do_spread(module, p, manifest)


if __name__ == "__main__":
    main()
