# Shared helpers for mtslime.posttrain modules: atomic writes, reads of a file that may be missing, checksums,
# Ansible's diff dict for a text file, sizes for messages.
from __future__ import annotations

import hashlib
import json
import os
import tempfile

CHUNK = 1 << 20


def sha256_file(path, chunk=CHUNK):
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_text(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_text(path, default=None):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return default


def read_bytes(path):
    """The file's bytes; None when it does not exist."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def read_json_object(path):
    """The JSON object in `path`; None when it is missing, unreadable, torn or not an object."""
    try:
        with open(path, encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def atomic_write(path, data, mode=None):
    """Write `data` (str or bytes) to `path` through a temp file in the same
    directory and a rename, so readers never see a half-written file.
    Keeps the mode of an existing file unless `mode` is given."""
    directory = os.path.dirname(os.path.abspath(path)) or "."
    if mode is None:
        try:
            mode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def text_diff(before, after, path):
    """Ansible's diff dict for a text file."""
    return {"before": before or "", "after": after or "", "before_header": path, "after_header": path}


def shorten(text, limit=160):
    """`text` cut to `limit` characters, ending in `...` when cut (for commands and bodies in messages)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def norm_flag(name):
    """A command-line flag's name as the inventory keys it: no leading dashes, '-' for '_', lower case."""
    return str(name).lstrip("-").replace("_", "-").lower()


def flag_on(value):
    """The inventory's convention for MODEL_ARGS: true = a bare flag; false or null = left out."""
    if value is None:
        return False
    if isinstance(value, str):
        return value.strip().lower() not in ("false", "no", "off", "0")
    return bool(value)


def human_bytes(num):
    num = float(num)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(num) < 1024.0 or unit == "TiB":
            return "%.1f %s" % (num, unit) if unit != "B" else "%d B" % num
        num /= 1024.0
    return "%.1f TiB" % num


def tree_bytes(path):
    """Bytes of the files under `path` (not following links; files that vanish meanwhile count 0)."""
    total = 0
    for top, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(top, name)).st_size
            except OSError:
                pass
    return total
