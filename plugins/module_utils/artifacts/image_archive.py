# A `docker save` archive of one image: which image it holds, and writing it so that the final path never holds a
# torn archive (saved into a temporary file next to it, checked, then renamed over it).
#
# The image ID an archive declares: manifest.json's Config ("<hex>.json" for the classic image store,
# "blobs/sha256/<hex>" for the containerd store), plus index.json's manifest digests when present (the containerd
# store's image ID is the digest of what the name points to). `docker load` restores the names in RepoTags.
#
# Standard library only; Python 3.8+ (runs on nodes and on the controller).
from __future__ import annotations

import json
import os
import re
import tarfile

_HEX = re.compile(r"^[0-9a-f]{64}$")


class ImageArchiveError(Exception):
    pass


def _member_json(archive, name, path):
    try:
        member = archive.extractfile(name)
    except KeyError:
        return None
    if member is None:
        raise ImageArchiveError("%s: %s is not a file in the archive; it is not a docker save archive" % (path, name))
    try:
        return json.loads(member.read().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ImageArchiveError("%s: its %s does not parse (%s); the archive is damaged" % (path, name, exc)) from exc


def _config_id(config):
    name = str(config or "")
    base = name[len("blobs/sha256/"):] if name.startswith("blobs/sha256/") else name
    base = base[:-len(".json")] if base.endswith(".json") else base
    return "sha256:" + base if _HEX.match(base) else None


def read(path):
    """{ids: [sha256:...], repo_tags: [...]} of the archive at `path`; ImageArchiveError naming the file when it is
    missing, not a tar, torn or not a docker save archive."""
    try:
        archive = tarfile.open(path, "r:")
    except FileNotFoundError:
        raise ImageArchiveError("%s does not exist" % path) from None
    except (OSError, tarfile.TarError) as exc:
        raise ImageArchiveError("%s is not a readable tar archive (%s); it is torn or not a docker save archive"
                                % (path, exc)) from exc
    try:
        with archive:
            manifest = _member_json(archive, "manifest.json", path)
            index = _member_json(archive, "index.json", path)
            # a torn archive can still open: its members must all end within the file, and hold what it lists
            names, end = set(), 0
            for member in archive:
                names.add(member.name.rstrip("/"))
                end = max(end, member.offset_data + (member.size if member.isfile() else 0))
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise ImageArchiveError("%s is torn (%s); save it again" % (path, exc)) from exc
    if end > os.path.getsize(path):
        raise ImageArchiveError("%s is torn (its last member ends at byte %d of %d); save it again"
                                % (path, end, os.path.getsize(path)))
    if not isinstance(manifest, list) or not manifest:
        raise ImageArchiveError("%s has no manifest.json listing an image; it is not a docker save archive" % path)
    ids, tags = [], []
    for entry in manifest:
        image_id = _config_id(entry.get("Config") if isinstance(entry, dict) else None)
        if image_id is None:
            raise ImageArchiveError("%s: manifest.json entry %r names no image config; the archive is damaged"
                                    % (path, entry))
        missing = [name for name in [entry.get("Config")] + list(entry.get("Layers") or []) if name not in names]
        if missing:
            raise ImageArchiveError("%s lacks %s that its manifest.json lists; it is torn, save it again"
                                    % (path, ", ".join(missing[:3])))
        ids.append(image_id)
        tags.extend(entry.get("RepoTags") or [])
    for entry in (index or {}).get("manifests", []) if isinstance(index, dict) else []:
        digest = str(entry.get("digest", "")) if isinstance(entry, dict) else ""
        if digest.startswith("sha256:") and digest not in ids:
            ids.append(digest)
    return {"ids": ids, "repo_tags": tags}


def tag_of(image):
    """The name `docker save <image>` records in RepoTags ("name:latest" for an untagged name), or None for a
    reference by digest (recorded without a name)."""
    if "@" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    return image if ":" in last else image + ":latest"


def problem(info, image, image_id):
    """Why the archive `info` (from read()) is not a save of `image` with ID `image_id`, or None."""
    if image_id not in info["ids"]:
        return "it holds image %s, not %s (%s)" % (", ".join(info["ids"]), image_id, image)
    tag = tag_of(image)
    if tag and tag not in info["repo_tags"]:
        return "it does not name %s (its names: %s), so loading it would not give that image" % (
            tag, ", ".join(info["repo_tags"]) or "none")
    return None


def temp_path(path):
    return os.path.join(os.path.dirname(path) or ".", ".%s.saving-%d" % (os.path.basename(path), os.getpid()))


def save(path, image, image_id, run_save, move_aside=None):
    """Save `image` (ID `image_id`) to `path`: `run_save(temp)` writes the archive to the temporary path (docker save
    -o temp image) and returns (rc, stderr). The temporary file is checked, then renamed to `path`, after
    `move_aside(path)` (returning where it went) took a file that was there out of the way; on failure the temporary
    file is removed and `path` is left as it was. Returns (read() of the result, where the old file went or None)."""
    parent = os.path.dirname(path) or "."
    os.makedirs(parent, exist_ok=True)
    temp = temp_path(path)
    try:
        rc, err = run_save(temp)
        if rc != 0:
            raise ImageArchiveError("docker save %s failed (rc %s): %s" % (image, rc, (err or "").strip()[-500:]))
        info = read(temp)
        why = problem(info, image, image_id)
        if why:
            raise ImageArchiveError("docker save %s wrote an archive that does not match the image: %s" % (image, why))
        with open(temp, "rb") as handle:
            os.fsync(handle.fileno())
        os.chmod(temp, 0o644)
        moved = move_aside(path) if move_aside and os.path.lexists(path) else None
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    return info, moved
