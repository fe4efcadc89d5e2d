#!/usr/bin/env python
"""Rename the throwaway variable `_` to `dummy` in the repo's Python files: ansible-test's pylint configuration
disallows the name `_` (disallowed-name), and `dummy` is the name it and ruff (dummy-variable-rgx in pyproject.toml)
take as unused. Only NAME tokens are renamed, never text in strings or comments; running it again changes nothing.
  tools/throwaway_name.py           rename in place (every git-tracked *.py file) and list the files changed
  tools/throwaway_name.py --check   list the files that still use `_`; exit status 1 if any
"""

import io
import subprocess
import sys
import tokenize

OLD, NEW = "_", "dummy"


def renamed(text):
    """The text with every NAME token `_` renamed; the same text when there is none."""
    lines = text.splitlines(keepends=True)
    spots = [token.start for token in tokenize.generate_tokens(io.StringIO(text).readline)
             if token.type == tokenize.NAME and token.string == OLD]
    for row, col in reversed(spots):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + NEW + line[col + len(OLD):]
    return "".join(lines)


def main(argv):
    check = argv == ["--check"]
    paths = subprocess.run(["git", "ls-files", "-z", "--", "*.py"], capture_output=True, text=True,
                           check=True).stdout.split("\0")
    changed = []
    for path in filter(None, paths):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        new = renamed(text)
        if new != text:
            changed.append(path)
            if not check:
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(new)
    for path in changed:
        print(path)
    return 1 if check and changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
