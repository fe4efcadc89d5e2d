#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: hf_download
short_description: Download a Hugging Face model (or a mirror with the same layout) into a directory, resumably
version_added: "0.1.0"
description:
  - Downloads the files of a Hugging Face model repository from O(base_url) into O(dest), one file after the other.
  - "By default it fetches C(config.json), C(generation_config.json) (optional), the tokenizer files
    (C(tokenizer_config.json); C(tokenizer.json), C(vocab.json), C(merges.txt), C(tokenizer.model),
    C(special_tokens_map.json), C(added_tokens.json) are optional and skipped when the server answers 404),
    C(model.safetensors.index.json), then every shard named in its C(weight_map), or C(model.safetensors) when
    the repository has no index."
  - Every file is written to C(<file>.part) and renamed to its name only when complete (its size equals the
    server's C(Content-Length) or C(Content-Range) total). A C(.part) left by an interrupted run is resumed with
    C(Range) requests; a file whose size already equals the server's is skipped, so a rerun of a finished
    download changes nothing.
  - A file of the final name whose size differs from the server's is moved aside to
    C(<file>.size-mismatch-<YYYYmmddTHHMMSS>), never deleted, and downloaded again (see RV(moved_to)).
  - Meant to run under C(async) with C(poll=0) while M(mtslime.posttrain.async_progress) watches O(dest)
    (C(watch_path)) and shows the bytes so far against the total written to O(expected_bytes_file).
  - O(dest) should be a temporary directory next to the final model directory; move it into place only after
    M(mtslime.posttrain.hf_model_check) passes on it.
  - "Failures name the file, the URL (never the token) and the class of problem: network (connection refused,
    timeout, DNS; retried), auth (HTTP 401/403), not found (HTTP 404), disk (no space or quota, with the free
    space left), server (HTTP 5xx/429 after the retries)."
  - Uses C(ansible.module_utils.urls), so the usual C(https_proxy)/C(no_proxy) environment variables apply.
options:
  base_url:
    description:
      - URL that the file names are appended to, for example C(https://huggingface.co/Qwen/Qwen3-8B/resolve/main),
        C(https://hf-mirror.com/Qwen/Qwen3-8B/resolve/main) or an internal mirror with the same layout.
    type: str
    required: true
  dest:
    description: Directory to download into (created when missing).
    type: path
    required: true
  files:
    description:
      - File names (relative to O(base_url)) to fetch instead of the default list. All of them are required.
    type: list
    elements: str
  token:
    description:
      - Hugging Face access token, sent as C(Authorization) C(Bearer) to the host of O(base_url) only (not to the
        hosts it redirects to). Never returned or logged.
    type: str
  retries:
    description:
      - How many times a failed request is retried (network errors and HTTP 408/429/5xx), waiting 1, 2, 4, ... seconds
        (at most 60) in between. An attempt that received data before failing does not use up a retry.
    type: int
    default: 5
  timeout:
    description: Seconds to wait for a connection or for data on it, per request.
    type: int
    default: 60
  validate_certs:
    description: Verify the server's TLS certificate. Turn off only for an internal mirror with a private CA.
    type: bool
    default: true
  expected_bytes_file:
    description:
      - File where the module writes the total size of all files (a decimal number) as soon as it knows it, before
        the shards are downloaded, for a progress display.
    type: path
extends_documentation_fragment:
  - mtslime.posttrain.attributes
attributes:
  check_mode:
    support: full
    details:
      - Fetches nothing. Reports O(base_url) and the files it would fetch when they are known (O(files), or the
        shards of a C(model.safetensors.index.json) already in O(dest)); C(changed) is predicted from the local
        files only.
  diff_mode:
    support: none
  idempotent:
    support: full
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Download Qwen3-8B in the background
  mtslime.posttrain.hf_download:
    base_url: https://hf-mirror.com/Qwen/Qwen3-8B/resolve/main
    dest: /data/models/.Qwen3-8B.download
    token: "{{ model_hf_token | default(omit) }}"
    expected_bytes_file: /data/models/.Qwen3-8B.download.bytes
  async: 14400
  poll: 0
  register: model_download

- name: Read the expected size once it is there
  ansible.builtin.slurp:
    src: /data/models/.Qwen3-8B.download.bytes
  register: model_bytes
  until: model_bytes is succeeded
  retries: 30
  delay: 2

- name: Wait for the download, showing bytes so far
  mtslime.posttrain.async_progress:
    jid: "{{ model_download.ansible_job_id }}"
    watch_path: /data/models/.Qwen3-8B.download
    expected_bytes: "{{ model_bytes.content | b64decode | int }}"
  register: download_wait
  until: download_wait.finished
  retries: 1440
  delay: 10
"""

RETURN = r"""
files:
  description:
    - The files, in download order, each with C(name), C(url), C(bytes) and C(action).
    - C(action) is C(downloaded), C(resumed), C(complete) (it was already there) or C(absent) (an optional file the
      server does not have); in check mode C(would fetch) or C(present).
  returned: always
  type: list
  elements: dict
downloaded_bytes:
  description: Bytes received in this run.
  returned: always
  type: int
total_bytes:
  description: Total size of the files on the server (in check mode, of the files already in O(dest)).
  returned: always
  type: int
actions:
  description: What was done, one sentence each.
  returned: always
  type: list
  elements: str
moved_to:
  description: Files of the wrong size that were moved aside.
  returned: when a file was moved aside
  type: list
  elements: str
base_url:
  description: O(base_url) without credentials.
  returned: always
  type: str
"""

import datetime
import os
import urllib.parse

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import atomic_write, human_bytes
from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import hf_index
from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts.http_fetch import FetchError, Fetcher, redact

INDEX = hf_index.INDEX
SINGLE = "model.safetensors"
# (name, required)
META_FILES = (
    ("config.json", True),
    ("generation_config.json", False),
    ("tokenizer_config.json", True),
    ("tokenizer.json", False),
    ("vocab.json", False),
    ("merges.txt", False),
    ("tokenizer.model", False),
    ("special_tokens_map.json", False),
    ("added_tokens.json", False),
)


class Abort(Exception):
    def __init__(self, msg):
        super().__init__(msg)
        self.msg = msg


def url_for(base_url, name):
    return base_url.rstrip("/") + "/" + urllib.parse.quote(name)


def safe_name(name):
    """A repository-relative file name that stays inside dest."""
    if not isinstance(name, str) or not name or name.startswith("/") or "\\" in name:
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))


def shard_names(index_path, source):
    try:
        tensors = hf_index.weight_map(index_path)
    except ValueError as exc:
        raise Abort("hf_download: %s from %s is not a usable index (%s); the repository at base_url is not a "
                    "sharded safetensors model, or the file is damaged - check base_url"
                    % (INDEX, source, exc)) from exc
    names = sorted(set(str(v) for v in tensors.values()))
    unsafe = [n for n in names if not safe_name(n)]
    if unsafe:
        raise Abort("hf_download: %s from %s names shard files outside the model directory (%s); refusing to "
                    "write them - check base_url" % (INDEX, source, ", ".join(repr(n) for n in unsafe[:3])))
    return names


def stamp():
    return datetime.datetime.now().strftime("%Y%m%dT%H%M%S")


class Download:
    def __init__(self, module, fetcher):
        self.module = module
        self.fetcher = fetcher
        self.base_url = module.params["base_url"]
        self.dest = module.params["dest"]
        self.files = []  # result entries
        self.actions = []
        self.moved = []
        self.downloaded = 0
        self.sizes = {}  # name -> server size (None when unknown)

    def probe(self, name, required):
        """The server's size of `name`; None (and an 'absent' entry) for a missing optional file."""
        url = url_for(self.base_url, name)
        try:
            size = self.fetcher.size(name, url)
        except FetchError as exc:
            if exc.kind == "not_found" and not required:
                self.files.append({"name": name, "url": redact(url), "bytes": 0, "action": "absent"})
                self.actions.append("skipped %s: the server does not have it (optional)" % name)
                return False
            raise
        self.sizes[name] = size
        return True

    def fetch(self, name):
        url = url_for(self.base_url, name)
        path = os.path.join(self.dest, name)
        expected = self.sizes.get(name)
        entry = {"name": name, "url": redact(url), "bytes": expected, "action": None}
        self.files.append(entry)
        if os.path.isfile(path):
            have = os.path.getsize(path)
            if expected is None or have == expected:
                # files get their final name only when complete; without a server size, trust that
                entry["action"] = "complete"
                entry["bytes"] = have
                return
            aside = "%s.size-mismatch-%s" % (path, stamp())
            os.replace(path, aside)
            self.moved.append(aside)
            self.actions.append("moved %s aside to %s: %s on disk, %s on the server"
                                % (path, aside, human_bytes(have), human_bytes(expected)))
        parent = os.path.dirname(path)
        if parent != self.dest:
            os.makedirs(parent, exist_ok=True)
        got = self.fetcher.download(name, url, path, expected=expected)
        self.downloaded += got["downloaded"]
        entry["bytes"] = got["bytes"]
        if got["resumed_from"]:
            entry["action"] = "resumed"
            self.actions.append("resumed %s at %s, received %s (%s in all)"
                                % (name, human_bytes(got["resumed_from"]), human_bytes(got["downloaded"]),
                                   human_bytes(got["bytes"])))
        else:
            entry["action"] = "downloaded"
            self.actions.append("downloaded %s (%s)" % (name, human_bytes(got["bytes"])))

    def write_expected(self):
        path = self.module.params["expected_bytes_file"]
        total = sum(v or 0 for v in self.sizes.values())
        if path:
            parent = os.path.dirname(os.path.abspath(path))
            os.makedirs(parent, exist_ok=True)
            atomic_write(path, "%d\n" % total)
        return total

    def run(self):
        params = self.module.params
        os.makedirs(self.dest, exist_ok=True)
        if params["files"]:
            for name in params["files"]:
                self.probe(name, True)
            total = self.write_expected()
            for name in params["files"]:
                self.fetch(name)
            return total
        present = [name for name, required in META_FILES if self.probe(name, required)]
        if self.probe(INDEX, False):
            self.fetch(INDEX)
            shards = shard_names(os.path.join(self.dest, INDEX), url_for(self.base_url, INDEX))
        else:
            try:
                self.probe(SINGLE, True)
            except FetchError as exc:
                if exc.kind != "not_found":
                    raise
                raise Abort("hf_download: neither %s nor %s at %s (HTTP 404); base_url does not point at a "
                            "safetensors model repository - check the organisation, repository and revision"
                            % (INDEX, SINGLE, redact(self.base_url))) from exc
            shards = [SINGLE]
        for name in shards:
            if name != SINGLE:
                self.probe(name, True)
        total = self.write_expected()
        for name in present + shards:
            self.fetch(name)
        # keep the result in the order files are listed: metadata, index, shards
        order = {n: i for i, n in enumerate([n for n, _r in META_FILES] + [INDEX] + shards)}
        self.files.sort(key=lambda e: order.get(e["name"], len(order)))
        return total


def check_mode_plan(module):
    params = module.params
    dest = params["dest"]
    base_url = params["base_url"]
    known = True
    if params["files"]:
        names = list(params["files"])
    else:
        names = [name for name, _required in META_FILES]
        index = os.path.join(dest, INDEX)
        names.append(INDEX)
        if os.path.isfile(index):
            try:
                names += shard_names(index, index)
            except Abort:
                known = False
        else:
            known = False
    files = []
    missing = 0
    for name in names:
        path = os.path.join(dest, name)
        here = os.path.isfile(path) and not os.path.exists(path + ".part")
        optional = not params["files"] and name in dict(META_FILES) and not dict(META_FILES)[name]
        if not here and not optional:
            missing += 1
        files.append({"name": name, "url": redact(url_for(base_url, name)),
                      "action": "present" if here else "would fetch",
                      "bytes": os.path.getsize(path) if here else None})
    fetch = [f["name"] for f in files if f["action"] == "would fetch"]
    actions = ["would fetch from %s: %s" % (redact(base_url), ", ".join(fetch) or "nothing new")]
    if not known:
        actions.append("would then fetch the shards named in %s (or %s when there is no index)" % (INDEX, SINGLE))
    return dict(
        changed=missing > 0 or not known, files=files, downloaded_bytes=0,
        total_bytes=sum(f["bytes"] or 0 for f in files), actions=actions, base_url=redact(base_url),
    )


def main():
    module = AnsibleModule(
        argument_spec=dict(
            base_url=dict(type="str", required=True),
            dest=dict(type="path", required=True),
            files=dict(type="list", elements="str"),
            token=dict(type="str", no_log=True),
            retries=dict(type="int", default=5),
            timeout=dict(type="int", default=60),
            validate_certs=dict(type="bool", default=True),
            expected_bytes_file=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    scheme = urllib.parse.urlsplit(params["base_url"]).scheme
    if scheme not in ("http", "https"):
        module.fail_json(msg="hf_download: base_url %r is not an http(s) URL; set it to for example "
                             "https://huggingface.co/Qwen/Qwen3-8B/resolve/main" % redact(params["base_url"]))
    bad = [n for n in params["files"] or [] if not safe_name(n)]
    if bad:
        module.fail_json(msg="hf_download: files %s are not relative names inside dest; list repository file names "
                             "such as config.json" % ", ".join(repr(n) for n in bad))
    if module.check_mode:
        module.exit_json(**check_mode_plan(module))

    fetcher = Fetcher(token=params["token"], timeout=params["timeout"], retries=params["retries"],
                      validate_certs=params["validate_certs"])
    job = Download(module, fetcher)
    try:
        total = job.run()
    except (FetchError, Abort) as exc:
        msg = exc.msg if isinstance(exc, Abort) else "hf_download: %s" % exc
        if params["token"]:
            msg = msg.replace(params["token"], "********")
        result = dict(files=job.files, downloaded_bytes=job.downloaded, actions=job.actions,
                      base_url=redact(params["base_url"]), total_bytes=sum(v or 0 for v in job.sizes.values()),
                      changed=bool(job.downloaded or job.moved))
        if isinstance(exc, FetchError):
            result["error_kind"] = exc.kind
        if job.moved:
            result["moved_to"] = job.moved
        module.fail_json(msg=msg, **result)
    except OSError as exc:
        module.fail_json(msg="hf_download: cannot write under %s: %s; check that dest is writable"
                             % (params["dest"], exc.strerror or exc), files=job.files, actions=job.actions,
                         downloaded_bytes=job.downloaded)
    changed = any(f["action"] in ("downloaded", "resumed") for f in job.files) or bool(job.moved)
    if not changed:
        job.actions.append("all %d files in %s are complete (%s)"
                           % (len([f for f in job.files if f["action"] == "complete"]), params["dest"],
                              human_bytes(total)))
    result = dict(changed=changed, files=job.files, downloaded_bytes=job.downloaded, total_bytes=total,
                  actions=job.actions, base_url=redact(params["base_url"]))
    if job.moved:
        result["moved_to"] = job.moved
    module.exit_json(**result)


if __name__ == "__main__":
    main()
