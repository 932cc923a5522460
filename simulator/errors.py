"""The project's errors: one line, naming the scenario field and the reason."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import ValidationError

SECTIONS = ("name", "workload", "parallel", "optimizations", "cluster", "network", "faults",
            "data", "failures", "checkpoint", "fidelity", "seed", "scenario", "--set", "sweep",
            "baseline")
"""Top-level scenario keys (plus ``scenario`` for the file itself and ``--set`` overrides)."""

_FIELD_RE = re.compile(r"\b(%s)(\.[A-Za-z_][\w\-]*)*" % "|".join(re.escape(s) for s in SECTIONS))


class ScenarioError(ValueError):
    """A scenario that cannot be loaded. ``str(err)`` is one line that names the field."""

    def __init__(self, message: str, field: str | None = None):
        message = " ".join(str(message).split())       # one line, whatever the source said
        if field is None:
            found = _FIELD_RE.search(message)
            field = found.group(0) if found else None
        self.field = field
        super().__init__(message)


class FabricError(ValueError):
    """A fabric that cannot carry the requested traffic (unknown link, cut-off destination)."""


_TAGS = {"int", "str", "float", "bool", "spine-leaf", "clos3", "rail-optimized"}


def _loc(loc: tuple) -> str:
    parts = [str(p) for p in loc
             if not (isinstance(p, str) and (p in _TAGS or "[" in p or p.startswith("function")))]
    return ".".join(parts)


MAX_ECHO = 80
"""Characters of a rejected value echoed in a message (a 5,000-character value is cut)."""


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= MAX_ECHO else text[:MAX_ECHO - 3] + "..."


def from_validation_error(err: ValidationError) -> ScenarioError:
    """Turn pydantic's multi-line report into one ScenarioError (first problem, then a count)."""
    errors = err.errors(include_url=False)
    first = errors[0]
    msg = first["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    where = _loc(first["loc"])
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    elif first["type"] == "union_tag_not_found":
        msg = "needs a kind (spine-leaf, clos3 or rail-optimized)"
    elif first["type"] == "union_tag_invalid":
        ctx = first["ctx"]
        msg = f"unknown kind {ctx.get('tag')!r}; expected {ctx.get('expected_tags')}"
    elif first["type"] == "missing":
        msg = "required field is missing"
    value = first.get("input")
    if where and isinstance(value, (int, float, str, bool)) and first["type"] not in (
            "value_error", "assertion_error", "missing"):
        msg += f" (got {_short(value)})"
    if where and msg.startswith(where + "."):           # "cluster: cluster.gpus ..." -> once
        where = ""
    more = f" (and {len(errors) - 1} more problem{'s' * (len(errors) > 2)})" \
        if len(errors) > 1 else ""
    text = f"{where}: {msg}{more}" if where else f"{msg}{more}"
    return ScenarioError(text, field=where or None)


def read_input(path: str | Path, field: str) -> str:
    """The text of a file the user named (scenario, sweep, baseline, flows): UTF-8, or one
    line naming ``field`` and what is wrong (missing, unreadable, not UTF-8 text)."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise ScenarioError(f"{field}: cannot read {path}: {err.strerror}", field=field) from None
    except UnicodeDecodeError as err:
        raise ScenarioError(f"{field}: {path} is not UTF-8 text (byte {err.start}: "
                            f"{err.object[err.start:err.start + 1]!r})", field=field) from None
