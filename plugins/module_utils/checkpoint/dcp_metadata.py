# Reads torch DCP's `.metadata` (the global metadata of a torch.distributed.checkpoint save, which is
# what Megatron's torch_dist format writes into every iter_XXXXXXX/ and release/) without torch and
# without running anything the file names.
#
# The file is a pickle of torch.distributed.checkpoint.metadata.Metadata (torch/distributed/checkpoint/
# filesystem.py, _FileSystemWriter.finish: pickle.dump(metadata, ...) into `.metadata.tmp`, then a
# rename). Its storage_data maps MetadataIndex -> _StorageInfo(relative_path, offset, length): the shard
# file each item lives in and its byte range there. A shard shorter than the ranges recorded for it is
# torn; that is checked from the sizes alone, the weights are never read.
#
# The unpickler maps every class the file names (torch's, pathlib's, Megatron's, anything) to an inert
# stand-in that only records its arguments and state: no import happens and no code of the file runs.
#
# Standard library only; Python 3.8+.
from __future__ import annotations

import os
import pickle

METADATA_FILE = ".metadata"
# A real 8B model with optimizer state has a .metadata of a few MB; anything far larger is not one.
MAX_BYTES = 512 * 1024 * 1024
_METADATA_CLASS = ("torch.distributed.checkpoint.metadata", "Metadata")
_STORAGE_INFO = "_StorageInfo"


class MetadataError(ValueError):
    """`.metadata` is missing, empty, not a pickle, or not torch DCP's Metadata."""


class Inert:
    """Stand-in for any class or function a pickle names: remembers the call and the state."""

    module = ""
    name = ""

    def __new__(cls, *args, **kwargs):
        obj = object.__new__(cls)
        obj.args = args
        obj.state = None
        return obj

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        self.state = state

    def __reduce__(self):  # never written back; keeps copy/pickle of a result from calling anything
        raise TypeError("inert stand-in of %s.%s" % (self.module, self.name))

    @classmethod
    def names(cls):
        return cls.module, cls.name

    def fields(self):
        """The instance's attributes as the pickle gave them (dataclasses: a dict; also (dict, slots))."""
        state = self.state
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], (dict, type(None))):
            merged = dict(state[0] or {})
            merged.update(state[1] or {})
            return merged
        return state if isinstance(state, dict) else {}


class _Unpickler(pickle.Unpickler):
    def __init__(self, handle):
        super().__init__(handle)
        self._classes = {}

    def find_class(self, module, name):
        key = (str(module), str(name))
        found = self._classes.get(key)
        if found is None:
            found = type(str(name).replace(".", "_") or "Anonymous", (Inert,), {"module": key[0], "name": key[1]})
            self._classes[key] = found
        return found

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("persistent ids are not used by torch DCP metadata")


def _is(obj, module, name):
    return isinstance(obj, Inert) and obj.names() == (module, name)


def load(path):
    """The pickled object of `path` with every class replaced by an Inert stand-in."""
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise MetadataError("%s cannot be read: %s" % (METADATA_FILE, exc.strerror or exc)) from None
    if size == 0:
        raise MetadataError("%s is empty (0 bytes)" % METADATA_FILE)
    if size > MAX_BYTES:
        raise MetadataError("%s is %d bytes, more than any DCP metadata (limit %d)" % (METADATA_FILE, size, MAX_BYTES))
    try:
        with open(path, "rb") as handle:
            return _Unpickler(handle).load()
    except OSError as exc:
        raise MetadataError("%s cannot be read: %s" % (METADATA_FILE, exc.strerror or exc)) from None
    except Exception as exc:  # any malformed pickle: EOFError, UnpicklingError, ValueError, IndexError ...
        raise MetadataError("%s is not a readable pickle (%s: %s)" % (METADATA_FILE, type(exc).__name__, exc)) from None


def _safe_relative(name):
    if not isinstance(name, str) or not name or os.path.isabs(name):
        return False
    return ".." not in name.replace("\\", "/").split("/")


def storage_extents(root):
    """What a loaded Metadata records about its shard files:
    {relative_path: bytes the file must hold at least (max offset + length)}.
    Raises MetadataError when `root` is not torch DCP's Metadata or its storage_data is malformed."""
    if not _is(root, *_METADATA_CLASS):
        found = "%s.%s" % root.names() if isinstance(root, Inert) else type(root).__name__
        raise MetadataError("%s holds %s, not torch.distributed.checkpoint.metadata.Metadata" % (METADATA_FILE, found))
    fields = root.fields()
    storage = fields.get("storage_data")
    if not isinstance(storage, dict):
        raise MetadataError("%s has no storage_data (the save did not finish writing it)" % METADATA_FILE)
    extents, checked = {}, set()
    for info in storage.values():
        if not (isinstance(info, Inert) and info.name == _STORAGE_INFO):
            found = getattr(info, "name", info)
            raise MetadataError("%s: storage_data holds %r, not _StorageInfo" % (METADATA_FILE, found))
        data = info.fields()
        relative, offset, length = data.get("relative_path"), data.get("offset"), data.get("length")
        if relative not in checked:
            if not _safe_relative(relative):
                raise MetadataError(
                    "%s names the shard %r, which is not a file inside the checkpoint" % (METADATA_FILE, relative))
            checked.add(relative)
        if any(not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in (offset, length)):
            raise MetadataError("%s: %s has offset %r and length %r" % (METADATA_FILE, relative, offset, length))
        end = offset + length
        if end > extents.get(relative, -1):
            extents[relative] = end
    return extents


def read_extents(path):
    """storage_extents(load(path)) plus a few counts: {'extents': {...}, 'items': n, 'version': str|None}."""
    root = load(path)
    extents = storage_extents(root)
    fields = root.fields()
    version = fields.get("version")
    return {
        "extents": extents,
        "items": len(fields.get("storage_data") or {}),
        "version": version if isinstance(version, str) else None,
    }
