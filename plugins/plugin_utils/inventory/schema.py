# The inventory's types: what a value of each kind must be, said once, for the configuration check
# (check.py), the docs (tools/configuration_doc.py) and the argument-spec test.
# A check returns None when the value is good, else the rule it breaks (a sentence for the message).
from __future__ import annotations

import ipaddress
import math
import re

from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.common import DASHBOARD_PORT

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
NAME_RE = re.compile(NAME_PATTERN)
NAME_RULE = ("must be a name: letters, digits, '.', '_' and '-', starting with a letter or digit (%s), because it "
             "becomes a file name, a container name, a job id or a shell word" % NAME_PATTERN)
# Characters a path may hold: it reaches shell scripts, YAML files, argv and PYTHONPATH-style lists.
PATH_RE = re.compile(r"^/[A-Za-z0-9._/+@%=,~-]*$")
PATH_RULE = ("must be an absolute, normalised path (no '..', '//' or '/./') of letters, digits and . _ - / + @ % = "
             ", ~ (no spaces, quotes, $, `, ;, :, globs or control characters)")
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_int(value):
    """A whole number: an int (not a bool), or a string of digits as `-e key=value` gives."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value) is not None


def as_int(value):
    return int(value) if is_int(value) else None


FLOAT_RE = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$")


def is_number(value):
    """A number: int or float (not a bool), or a numeric string (YAML reads 1e-6 as a string)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return not isinstance(value, float) or math.isfinite(value)
    return isinstance(value, str) and FLOAT_RE.fullmatch(value) is not None


def as_number(value):
    return float(value) if is_number(value) else None


def kind_of(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a dict"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


class Type:
    """A value kind. `doc` is what docs/configuration.md shows; `spec_type` the argument-spec type."""
    doc = "any"
    spec_type = "raw"
    empty_ok = False

    def fix(self, name):
        return "set %s to a %s" % (name, self.doc)

    def check(self, value):
        return None

    def is_empty(self, value):
        return value is None or value == "" or value == [] or value == {}


class Str(Type):
    spec_type = "str"

    def __init__(self, pattern=None, rule=None, empty_ok=False, doc=None):
        self.pattern = re.compile(pattern) if pattern else None
        self.rule = rule
        self.empty_ok = empty_ok
        self.doc = doc or ("string matching `%s`" % pattern if pattern else "string (one line)")
        if empty_ok:
            self.doc += ', or ""'

    def check(self, value):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and self.pattern is None:
            value = str(value)
        if not isinstance(value, str):
            return "must be a string, not %s" % kind_of(value)
        if value == "" and self.empty_ok:
            return None
        if self.pattern and not self.pattern.fullmatch(value):
            return self.rule or ("must match %s" % self.pattern.pattern)
        if CONTROL_RE.search(value):
            return "must be one line without control characters (newline, tab, ...)"
        if not value and not self.empty_ok:
            return "must not be empty"
        return None


class Name(Str):
    def fix(self, name):
        return ("use only letters, digits, '.', '_' and '-' in %s, starting with a letter or digit (for example "
                "qwen3-8B-lr2e-6)" % name)

    def __init__(self, empty_ok=False):
        super().__init__(NAME_PATTERN, NAME_RULE, empty_ok=empty_ok, doc="name (`%s`)" % NAME_PATTERN)


class Path(Str):
    """An absolute path, normalised, in the safe character set. `mount`: must lie under a container mount."""

    def fix(self, name):
        return "set %s to an absolute, normalised path such as /data/checkpoints/my-run" % name

    def __init__(self, empty_ok=False, mount=False):
        super().__init__(empty_ok=empty_ok, doc="absolute path")
        self.mount = mount
        if empty_ok:
            self.doc += ', or ""'

    def check(self, value):
        if not isinstance(value, str):
            return "must be an absolute path (a string), not %s" % kind_of(value)
        problem = super().check(value)
        if problem or value == "":
            return problem
        if not value.startswith("/"):
            return "must be an absolute path (it is used inside the container and on the node)"
        parts = value.rstrip("/").split("/")[1:]
        if "//" in value or any(part in ("", ".", "..") for part in parts):
            return "must be normalised: no '..', '//' or '/./' components"
        if not PATH_RE.fullmatch(value):
            return PATH_RULE
        return None


class ControllerPath(Str):
    """A path on the controller (absolute or relative to the playbook); '..' allowed, control characters not."""

    def __init__(self, empty_ok=False):
        super().__init__(empty_ok=empty_ok, doc="path on the controller")


class Url(Str):
    def __init__(self, schemes=("http", "https", "file"), empty_ok=False):
        pattern = r"^(%s)://[^\s'\"`$;|&<>\\]+$" % "|".join(schemes)
        super().__init__(pattern, "must be a %s URL without spaces, quotes or shell characters"
                         % "/".join(schemes), empty_ok=empty_ok, doc="%s URL" % "/".join(schemes))


class Int(Type):
    spec_type = "int"

    def fix(self, name):
        return "set %s to a whole number, unquoted and without decimals (%s)" % (name, self.doc)

    def __init__(self, minimum=None, maximum=None, empty_ok=False):
        self.minimum, self.maximum = minimum, maximum
        self.empty_ok = empty_ok  # null is a value of its own (for example "estimate it")
        bounds = []
        if minimum is not None:
            bounds.append(">= %d" % minimum)
        if maximum is not None:
            bounds.append("<= %d" % maximum)
        self.doc = "integer" + (" " + ", ".join(bounds) if bounds else "") + (", or null" if empty_ok else "")
        self.range_rule = "must be an integer %s" % ", ".join(bounds)

    def check(self, value):
        if not is_int(value):
            return "must be a whole number (%s), not %s" % (self.doc, kind_of(value))
        number = int(value)
        if self.minimum is not None and number < self.minimum or self.maximum is not None and number > self.maximum:
            return self.range_rule
        return None


class Port(Int):
    def fix(self, name):
        return "set %s to a free port number, unquoted and without decimals (1-65535, for example %d)" % (
            name,
            DASHBOARD_PORT,
        )

    def __init__(self):
        super().__init__(1, 65535)
        self.doc = "port (integer 1-65535)"
        self.range_rule = "must be a port number, 1-65535"


class Number(Type):
    spec_type = "float"

    def fix(self, name):
        return "set %s to a number (%s)" % (name, self.doc)

    def __init__(self, minimum=None, maximum=None, min_exclusive=False):
        self.minimum, self.maximum, self.min_exclusive = minimum, maximum, min_exclusive
        bounds = []
        if minimum is not None:
            bounds.append(("> %g" if min_exclusive else ">= %g") % minimum)
        if maximum is not None:
            bounds.append("<= %g" % maximum)
        self.doc = "number" + (" " + ", ".join(bounds) if bounds else "")

    def check(self, value):
        if not is_number(value):
            return "must be a number, not %s" % kind_of(value)
        number = float(value)
        low = self.minimum
        if low is not None and (number <= low if self.min_exclusive else number < low):
            return "must be a %s" % self.doc
        if self.maximum is not None and number > self.maximum:
            return "must be a %s" % self.doc
        return None


class Bool(Type):
    spec_type = "bool"
    doc = "boolean (YAML true/false)"

    def fix(self, name):
        return "write %s: true or %s: false, without quotes" % (name, name)

    def check(self, value):
        if not isinstance(value, bool):
            return "must be a YAML boolean (true or false, unquoted), not %s" % kind_of(value)
        return None

    def is_empty(self, value):
        return value is None


class FlagBool(Bool):
    """A boolean meant to be given on the command line (-e name=true), where Ansible passes a string."""
    doc = "boolean (YAML true/false; `-e name=true` works too)"
    WORDS = ("true", "false", "yes", "no")

    def check(self, value):
        if isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in self.WORDS):
            return None
        return "must be true or false (also as -e %s=true), not %s" % ("<name>", kind_of(value))


class Choice(Type):
    spec_type = "str"

    def fix(self, name):
        return "set %s to one of %s" % (name, ", ".join(str(c) for c in self.choices))

    def __init__(self, *choices):
        self.choices = choices
        self.doc = "one of " + ", ".join("`%s`" % c for c in choices)

    def check(self, value):
        if isinstance(value, bool) or value not in self.choices:
            return "must be one of %s" % ", ".join(str(c) for c in self.choices)
        return None


class Ip(Type):
    spec_type = "str"

    def fix(self, name):
        return "set %s to the node's IP address on the training network (for example 10.0.0.11)" % name

    def __init__(self, empty_ok=False, allow_localhost=False):
        self.empty_ok, self.allow_localhost = empty_ok, allow_localhost
        self.doc = "IP address" + (" or `localhost`" if allow_localhost else "") + (', or ""' if empty_ok else "")

    def check(self, value):
        if not isinstance(value, str):
            return "must be an IP address (a string such as 10.0.0.11), not %s" % kind_of(value)
        if value == "" and self.empty_ok or value == "localhost" and self.allow_localhost:
            return None
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return "must be an IP address (a host name would put a line Ray and slime cannot use in the hostfile)"
        return None


class Volume(Str):
    """A bind mount host:container[:mode], both sides absolute paths."""
    MODES = re.compile(r"^(ro|rw|z|Z|shared|rshared|slave|rslave|private|rprivate|nocopy|delegated|cached|consistent)"
                       r"(,(ro|rw|z|Z|shared|rshared|slave|rslave|private|rprivate|nocopy|delegated|cached|"
                       r"consistent))*$")

    def __init__(self):
        super().__init__(doc="bind mount `host:container[:mode]`, both absolute paths")

    def check(self, value):
        if not isinstance(value, str):
            return "must be a string host:container[:mode], not %s" % kind_of(value)
        problem = super().check(value)
        if problem:
            return problem
        parts = value.split(":")
        if len(parts) not in (2, 3):
            return "must be host:container[:mode]"
        for side in parts[:2]:
            if Path().check(side):
                return "must be host:container[:mode] where both sides are absolute paths: " + PATH_RULE
        if len(parts) == 3 and not self.MODES.fullmatch(parts[2]):
            return "has an unknown mount mode %r (ro, rw, z, Z, ...)" % parts[2]
        return None


class List(Type):
    spec_type = "list"

    def fix(self, name):
        return "make %s a YAML list (lines starting with '- ') of %s" % (name, self.elements.doc if self.elements
                                                                         else "values")

    def __init__(self, elements=None, min_items=0):
        self.elements, self.min_items = elements, min_items
        self.doc = "list" + (" of %s" % elements.doc if elements else "") + (
            " (at least %d)" % min_items if min_items else "")

    def check(self, value):
        if not isinstance(value, (list, tuple)):
            return "must be a list, not %s" % kind_of(value)
        if len(value) < self.min_items:
            return "must have at least %d item(s)" % self.min_items
        if self.elements:
            for index, item in enumerate(value):
                problem = self.elements.check(item)
                if problem:
                    return "item %d (%r) %s" % (index, item, problem)
        return None


class Dict(Type):
    spec_type = "dict"

    def fix(self, name):
        return "make %s a YAML mapping (key: value lines)%s" % (name, ", " + self.doc if self.values else "")

    def __init__(self, keys=None, values=None, key_rule=None, doc=None):
        self.keys = re.compile(keys) if keys else None
        self.values, self.key_rule = values, key_rule
        self.doc = doc or "dict" + (" of %s" % values.doc if values else "")

    def check(self, value):
        if not isinstance(value, dict):
            return "must be a dict (key: value), not %s" % kind_of(value)
        for key, item in value.items():
            if self.keys and not (isinstance(key, str) and self.keys.fullmatch(key)):
                return "key %r %s" % (key, self.key_rule or "must match %s" % self.keys.pattern)
            if self.values:
                problem = self.values.check(item)
                if problem:
                    return "[%r] %s" % (key, problem)
        return None


class Scalar(Type):
    """A one-line string, a number or a boolean (an environment value, a flag value)."""
    doc = "string, number or boolean"

    def check(self, value):
        if isinstance(value, (bool, int, float)):
            return None
        if not isinstance(value, str):
            return "must be a string or a number, not %s" % kind_of(value)
        if CONTROL_RE.search(value):
            return "must be one line without control characters"
        return None


def env_dict():
    return Dict(ENV_NAME_RE.pattern, Scalar(), "must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
                doc="dict of environment variables (`NAME: value`)")


class Var:
    """One inventory variable: its type, who may set it how, and what it must not overlap with.

    scope: node (each node its own value), cluster (every node of a training cluster must agree:
    the head's value is the one used), fleet (run-wide, an extra var).
    required: the value must be set and not empty. secret: never shown in a message.
    overlap: the path class of the no-overlap rule (data, hf, converted, save, work, log).
    """

    def __init__(self, name, type_, doc, scope="node", required=False, secret=False, overlap=None):
        self.name, self.type, self.doc = name, type_, doc
        self.scope, self.required, self.secret, self.overlap = scope, required, secret, overlap

    def check(self, value):
        if value is None:
            return None if self.type.empty_ok else "must be set (it is null)"
        if self.required and self.type.is_empty(value) and not self.type.empty_ok:
            return "must not be empty"
        return self.type.check(value)
