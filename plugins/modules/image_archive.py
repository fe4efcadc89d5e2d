#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: image_archive
short_description: Keep a docker save archive of an image on the node, or read which image an archive holds
version_added: "0.1.0"
description:
  - C(state=saved) makes O(path) a C(docker save) archive of O(image) as the node's Docker engine holds it. An
    archive already there that names the image and holds its ID (manifest.json's config) is kept (C(changed=false)).
    Otherwise the image is saved into a temporary file next to O(path), checked, and renamed over it, so O(path)
    never holds a torn archive; a different file that was there is moved aside (C(<path>.replaced-<UTC time>)),
    never deleted.
  - C(state=read) only reads the archive at O(path) (no Docker needed; it runs on the controller too) and returns
    the image IDs and names it holds.
  - The image fan-out (playbooks/plays/fanout_image.yml) uses it on the seed; the container role then checks the
    image it loads from the spread archive against the returned RV(ids).
options:
  state:
    description: What to do.
    type: str
    choices: [saved, read]
    default: saved
  path:
    description: The archive on this node.
    type: path
    required: true
  image:
    description: The image (name:tag as C(container_image)); required for C(state=saved).
    type: str
  docker:
    description: The Docker CLI on this node.
    type: str
    default: docker
extends_documentation_fragment:
  - mtslime.posttrain.attributes
attributes:
  check_mode:
    support: full
    details: Reports whether the archive would be saved; writes nothing.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: An archive that holds the image's ID under its name is kept.
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Save the training image once, on the seed
  mtslime.posttrain.image_archive:
    image: registry.mthreads.com/mcctest/training-suite:v2.1.6
    path: /data/mtslime/images/registry.mthreads.com_mcctest_training-suite_v2.1.6.tar
  register: seed_image

- name: Read which image an archive on the controller holds
  mtslime.posttrain.image_archive:
    state: read
    path: /srv/mtslime/artifacts/registry.mthreads.com_mcctest_training-suite_v2.1.6.tar
  delegate_to: localhost
"""

RETURN = r"""
image_id:
  description: The image's ID (C(state=saved) - the engine's; C(state=read) - the archive's first image).
  returned: always
  type: str
  sample: sha256:3f57d9401f8d42f986df300f0c69192fc41da28ccc8d797829467780db3dd741
ids:
  description: Every image ID the archive declares (after the save, for C(state=saved); none in check mode).
  returned: always
  type: list
  elements: str
repo_tags:
  description: The names C(docker load) restores from the archive.
  returned: always
  type: list
  elements: str
size:
  description: The archive's size in bytes (0 when it is not there, as in check mode before a save).
  returned: always
  type: int
moved_aside:
  description: Where a different file that was at O(path) was moved.
  returned: state=saved
  type: str
actions:
  description: What was done, in words.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import aside, image_archive


def size_of(path):
    return os.path.getsize(path) if os.path.isfile(path) else 0


def do_read(module, path):
    try:
        info = image_archive.read(path)
    except image_archive.ImageArchiveError as exc:
        module.fail_json(msg="image archive: %s (a docker save archive of the training image belongs there)" % exc)
    module.exit_json(changed=False, image_id=info["ids"][0], ids=info["ids"], repo_tags=info["repo_tags"],
                     size=size_of(path), actions=["%s holds %s" % (path, ", ".join(info["repo_tags"]) or
                                                                   info["ids"][0])])


def engine_id(module, image):
    rc, out, err = module.run_command([module.params["docker"], "image", "inspect", "--format", "{{.Id}}", image])
    if rc != 0:
        if "No such image" in err or "No such object" in err:
            if module.check_mode:
                return None
            module.fail_json(msg="image archive: the Docker engine on this node lacks %s; pull or load it here first "
                                 "(the image fan-out saves it from the seed's engine)" % image)
        module.fail_json(msg="image archive: docker image inspect %s failed (rc %d): %s; is the Docker engine "
                             "reachable by this user (become)?" % (image, rc, err.strip()))
    return out.strip()


def do_saved(module, path, image):
    image_id = engine_id(module, image)
    if image_id is None:  # check mode, before the seed pulls it
        module.exit_json(changed=True, image_id="", ids=[], repo_tags=[], size=size_of(path), moved_aside=None,
                         actions=["would save %s to %s once this node's engine has it" % (image, path)])
    why = "it is not there"
    if os.path.lexists(path):
        try:
            why = image_archive.problem(image_archive.read(path), image, image_id)
        except image_archive.ImageArchiveError as exc:
            why = str(exc)
        if why is None:
            info = image_archive.read(path)
            module.exit_json(changed=False, image_id=image_id, ids=info["ids"], repo_tags=info["repo_tags"],
                             size=size_of(path), moved_aside=None,
                             actions=["%s already holds %s (%s)" % (path, image, image_id[:19])])
    action = "save %s (%s) to %s: %s" % (image, image_id[:19], path, why)
    if module.check_mode:
        module.exit_json(changed=True, image_id=image_id, ids=[], repo_tags=[], size=size_of(path),
                         moved_aside=None, actions=["would " + action])

    def run_save(temp):
        rc, _out, err = module.run_command([module.params["docker"], "save", "-o", temp, image])
        return rc, err

    try:
        info, moved = image_archive.save(path, image, image_id, run_save,
                                         move_aside=lambda old: aside.move_aside(old, "replaced"))
    except (image_archive.ImageArchiveError, OSError) as exc:
        module.fail_json(msg="image archive: %s (%s is left as it was; is there room on its file system?)"
                             % (exc, path))
    actions = ["did " + action] + (["moved the earlier file to %s" % moved] if moved else [])
    module.exit_json(changed=True, image_id=image_id, ids=info["ids"], repo_tags=info["repo_tags"],
                     size=size_of(path), moved_aside=moved, actions=actions)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["saved", "read"], default="saved"),
            path=dict(type="path", required=True),
            image=dict(type="str"),
            docker=dict(type="str", default="docker"),
        ),
        required_if=[("state", "saved", ["image"])],
        supports_check_mode=True,
    )
    p = module.params
    if p["state"] == "read":
        do_read(module, p["path"])
    do_saved(module, p["path"], p["image"])


if __name__ == "__main__":
    main()
