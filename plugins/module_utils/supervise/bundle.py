# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""lib.zip, the supervisor's code: the Python files a module of this collection runs with (Ansible's
module_utils and this collection's, the payload Ansible sends), in a zip that Python runs (`python3 lib.zip`).
job_supervise builds it from its own payload, so the supervisor runs exactly the code of this version of the
collection; the zip is byte-for-byte the same for the same code (fixed dates, sorted names), so a rerun that
changed nothing writes nothing.
Standard library only; Python 3.8+."""
from __future__ import annotations

import io
import os
import zipfile

import ansible.module_utils.basic as ansible_basic

MAIN = ("import sys\n"
        "from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import cli\n"
        "sys.exit(cli.main())\n")
KEEP_PREFIXES = ("ansible/", "ansible_collections/")
SKIP_PREFIXES = ("ansible_collections/mtslime/posttrain/plugins/modules/",)
DATE = (1980, 1, 1, 0, 0, 0)
COLLECTION_PACKAGE = os.path.join("ansible_collections", "mtslime", "posttrain", "plugins", "module_utils")


def _wanted(name):
    return name.endswith(".py") and name.startswith(KEEP_PREFIXES) and not name.startswith(SKIP_PREFIXES)


def payload_entries():
    """{name: bytes} of the code this process runs with: the payload zip under Ansible, else (tests, a source
    checkout) the files of the imported packages on disk."""
    archive = getattr(getattr(ansible_basic, "__loader__", None), "archive", None)
    if archive:
        with zipfile.ZipFile(archive) as payload:
            return {name: payload.read(name) for name in payload.namelist() if _wanted(name)}
    return _files_on_disk()


def _files_on_disk():
    entries = {}
    ansible_dir = os.path.dirname(os.path.dirname(os.path.abspath(ansible_basic.__file__)))
    module_utils_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    roots = [(os.path.dirname(ansible_dir), os.path.join(ansible_dir, "module_utils")),
             (module_utils_dir[:-len(COLLECTION_PACKAGE)].rstrip(os.sep), module_utils_dir)]
    for base, top in roots:
        for folder, dirs, names in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in names:
                full = os.path.join(folder, name)
                relative = os.path.relpath(full, base).replace(os.sep, "/")
                if _wanted(relative):
                    with open(full, "rb") as handle:
                        entries[relative] = handle.read()
    return _with_packages(entries)


def _with_packages(entries):
    """Every folder on the way to a file gets an __init__.py (zipimport knows no namespace packages)."""
    full = dict(entries)
    for name in list(entries):
        parts = name.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            full.setdefault("/".join(parts[:depth]) + "/__init__.py", b"")
    return full


def build(entries):
    """The zip's bytes: `entries` ({name: bytes}) and __main__.py, sorted, with a fixed date."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(dict(_with_packages(entries), **{"__main__.py": MAIN.encode()}).items()):
            info = zipfile.ZipInfo(name, date_time=DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()
