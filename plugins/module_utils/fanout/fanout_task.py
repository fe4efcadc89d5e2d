# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The fanout module's work (plugins/modules/fanout.py holds its documentation): main(module) runs it for an
AnsibleModule made with module_kwargs(). The supervisor runs the same function with the arguments the role gave
the module (module_utils/supervise). Standard library only; Python 3.8+."""
from __future__ import annotations

import json
import os
import time

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


def module_kwargs():
    return dict(
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


def main(module):
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
