# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""A local runtime_env working_dir as Ray packages it (`ray job submit --runtime-env`): the files kept
(excludes, .gitignore, .rayignore, .git/ left out, Ray's pattern rules), zipped with the files at
the root and Unix modes kept, named _ray_pkg_<sha256 of the zip>.zip, under Ray's size limit.
Standard library only."""
from __future__ import annotations

import fnmatch
import hashlib
import io
import os
import re
import stat
import zipfile

from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.errors import RayApiError

PKG_PREFIX = "_ray_pkg_"
# Ray refuses packages of 512 MiB or more (GCS_STORAGE_MAX_SIZE = max gRPC message size).
PKG_MAX_BYTES = 512 * 1024 * 1024
# Always left out of a working_dir package (Ray itself would include them; they are never needed
# by a job and a repository's history can exceed the GCS limit on its own).
PKG_DEFAULT_EXCLUDES = (".git/",)
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def split_package_uri(uri):
    match = re.match(r"^([a-z0-9]+)://([^/]+)$", uri or "")
    if not match:
        raise ValueError("%r is not a package URI like gcs://_ray_pkg_<hash>.zip" % uri)
    return match.group(1), match.group(2)


def _compile_pattern(pattern):
    """One .gitignore-style line -> (regex, negate, dir_only) or None for blanks/comments.

    Supported: '#' comments, '!' negation, trailing '/' (directories only), a leading or
    inner '/' anchors the pattern to its base directory, otherwise it matches a name at
    any depth; '*', '?', '[...]' and '**' as in git."""
    line = pattern.rstrip("\n").rstrip("\r")
    if not line.strip() or line.lstrip().startswith("#"):
        return None
    line = line.strip()
    negate = line.startswith("!")
    if negate:
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    out = []
    i = 0
    while i < len(line):
        if line.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif line.startswith("/**", i) and i + 3 == len(line):
            out.append("/.*")
            i += 3
        elif line.startswith("**", i):
            out.append(".*")
            i += 2
        elif line[i] == "*":
            out.append("[^/]*")
            i += 1
        elif line[i] == "?":
            out.append("[^/]")
            i += 1
        elif line[i] == "[":
            end = line.find("]", i + 1)
            if end == -1:
                out.append(re.escape(line[i]))
                i += 1
            else:
                out.append(fnmatch.translate(line[i : end + 1])[4:-3])
                i = end + 1
        else:
            out.append(re.escape(line[i]))
            i += 1
    body = "".join(out)
    regex = re.compile(("^" if anchored else "^(?:.*/)?") + body + "$")
    return regex, negate, dir_only


class _Rules:
    """Patterns that apply under one base directory (relative paths with '/')."""

    def __init__(self, base, lines):
        self.base = base  # relative dir ('' for the root)
        self.rules = [r for r in (_compile_pattern(line) for line in lines) if r]

    def decide(self, relpath, is_dir):
        """True (exclude), False (re-include by '!'), None (no opinion)."""
        if self.base:
            if not relpath.startswith(self.base + "/"):
                return None
            relpath = relpath[len(self.base) + 1 :]
        verdict = None
        for regex, negate, dir_only in self.rules:
            if dir_only and not is_dir:
                continue
            if regex.match(relpath):
                verdict = not negate
        return verdict


def _read_ignore_file(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.readlines()
    except OSError:
        return []


def _relative_excludes(directory, excludes):
    out = []
    for item in excludes or ():
        item = str(item)
        if os.path.isabs(item):
            absolute = os.path.normpath(item)
            if absolute == directory or not absolute.startswith(directory + os.sep):
                continue  # outside the working dir: Ray would never match it either
            item = "/" + os.path.relpath(absolute, directory) + ("/" if item.endswith("/") else "")
        out.append(item)
    return out


def collect_files(directory, excludes=None):
    """The files and empty directories a working_dir package holds, as sorted
    relative paths ('dir/' for empty directories).

    Rules (a simplified form of what `ray job submit` does): the runtime_env `excludes`
    (relative to the working dir; absolute paths inside it are accepted), every
    `.gitignore` and `.rayignore` found on the way (each applies below its own directory,
    git style), and always `.git/`. An excluded directory is not entered. Symbolic links
    to files are stored as the file they point to; links to directories are followed once."""
    directory = os.path.abspath(directory)
    root_rules = [_Rules("", list(PKG_DEFAULT_EXCLUDES) + _relative_excludes(directory, excludes))]
    entries = []
    seen_dirs = set()

    def excluded(rules, rel, is_dir):
        verdict = None
        for rule in rules:
            decision = rule.decide(rel, is_dir)
            if decision is not None:
                verdict = decision
        return bool(verdict)

    def walk(abs_dir, rel_dir, rules):
        real = os.path.realpath(abs_dir)
        if real in seen_dirs:
            return
        seen_dirs.add(real)
        local = []
        for ignore in (".gitignore", ".rayignore"):
            lines = _read_ignore_file(os.path.join(abs_dir, ignore))
            if lines:
                local.append(_Rules(rel_dir, lines))
        rules = rules + local
        try:
            names = sorted(os.listdir(abs_dir))
        except OSError as exc:
            raise RayApiError(
                "cannot list %s for the working_dir package: %s" % (abs_dir, exc.strerror or exc), kind="package"
            ) from exc
        if not names and rel_dir:
            entries.append(rel_dir + "/")
        for name in names:
            abs_path = os.path.join(abs_dir, name)
            rel = rel_dir + "/" + name if rel_dir else name
            is_dir = os.path.isdir(abs_path)
            if excluded(rules, rel, is_dir):
                continue
            if is_dir:
                walk(abs_path, rel, rules)
            elif os.path.isfile(abs_path):
                entries.append(rel)
            # sockets, fifos and dangling links are skipped

    walk(directory, "", root_rules)
    return sorted(entries)


def build_package(directory, excludes=None, max_bytes=PKG_MAX_BYTES):
    """Zip a local working_dir the way Ray's client does (files at the root of the zip,
    Unix modes kept so scripts stay executable) and name it after its content.

    The zip is deterministic (sorted entries, fixed timestamps), so its name
    `_ray_pkg_<first 32 hex of sha256(zip)>.zip` changes exactly when a file's path,
    mode or content changes. Returns {"uri", "name", "data", "files", "sha256", "directory"}."""
    directory = os.path.abspath(os.path.expanduser(directory))
    if not os.path.isdir(directory):
        raise RayApiError("working_dir %s is not a directory" % directory, kind="package")
    files = collect_files(directory, excludes)
    buffer = io.BytesIO()
    total = 0
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for rel in files:
            if rel.endswith("/"):
                info = zipfile.ZipInfo(rel, date_time=ZIP_DATE)
                info.external_attr = (stat.S_IFDIR | 0o755) << 16 | 0x10
                archive.writestr(info, b"")
                continue
            path = os.path.join(directory, rel)
            try:
                mode = os.stat(path).st_mode & 0o7777
                with open(path, "rb") as handle:
                    content = handle.read()
            except OSError as exc:
                raise RayApiError(
                    "cannot read %s for the working_dir package: %s (add it to runtime_env excludes or .rayignore)"
                    % (path, exc.strerror or exc),
                    kind="package",
                ) from exc
            total += len(content)
            info = zipfile.ZipInfo(rel, date_time=ZIP_DATE)
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, content)
    data = buffer.getvalue()
    if len(data) >= max_bytes:
        raise RayApiError(
            "the working_dir package of %s is %d bytes, over Ray's limit of %d bytes: add large files or "
            "directories (checkpoints, logs, data) to runtime_env excludes, .gitignore or .rayignore"
            % (directory, len(data), max_bytes),
            kind="package",
        )
    digest = hashlib.sha256(data).hexdigest()
    name = "%s%s.zip" % (PKG_PREFIX, digest[:32])
    return {
        "uri": "gcs://" + name,
        "name": name,
        "data": data,
        "files": len(files),
        "sha256": digest,
        "directory": directory,
    }


def is_local_working_dir(value):
    """A runtime_env working_dir that names a local directory (not a URI)."""
    return isinstance(value, str) and "://" not in value and value != ""
