"""Stand-ins for the accelerator tools (mthreads-gmi, nvidia-smi) that print recorded outputs
(tests/unit/data/accelerator/), and a node whose PATH holds no real tool. Tests only: the probe itself is real."""
from __future__ import annotations

import stat

from ansible_collections.mtslime.posttrain.plugins.module_utils.preflight import accelerator as acc


def write_tool(directory, name, answers):
    """A stand-in `name` in `directory`: for each argument string in `answers` it prints the given
    text and exits with the given rc; anything else is an unknown option (rc 2), as old versions do.
    Only absolute paths inside, so it works with an empty PATH."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = ["#!/bin/sh", "# stand-in for %s (tests only): prints recorded output" % name, 'case "$*" in']
    for number, (args, (rc, text)) in enumerate(sorted(answers.items())):
        out = directory / ("%s.%d.out" % (name, number))
        out.write_text(text)
        lines.append('  "%s") /bin/cat "%s"; exit %d;;' % (args, out, rc))
    lines += ['  *) echo "%s: unknown option $*" >&2; exit 2;;' % name, "esac", ""]
    path = directory / name
    path.write_text("\n".join(lines))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(directory)


def no_tools(monkeypatch, path_dir):
    """PATH is `path_dir` alone and no vendor install directory is searched."""
    path_dir.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(path_dir))
    monkeypatch.setattr(acc, "EXTRA_TOOL_DIRS", {})
