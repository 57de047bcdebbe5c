"""Our tensor names in Hugging Face's, by reading an importer's rename rules backwards, so that each
architecture keeps one table for both directions.

A rule `(pattern, replacement)` renames an HF name that matches `pattern` into `replacement`, its
group references (`\\1`) filled in. Read backwards, the replacement is the pattern: its literal text,
and for each reference the referenced group's own sub-pattern (`(\\d+)`, `(weight|bias)`). A name of
ours that matches is written as the HF pattern with each capturing group replaced by what its
reference matched, and every other part in its one canonical form: an optional non-capturing group
is left out (`cls\\.predictions\\.(?:decoder\\.)?bias` is written `cls.predictions.bias`).

A rule with nothing canonical to write (an alternation outside a group that a reference fills, a
character class or a wildcard outside one), a rule that renames by a function, and a rule that keeps
a tensor aside (`None`) are not read backwards: `backwards` raises for a name of ours that only such
rules, or none, cover, so a parameter cannot fall out of an export unnoticed. What a rename cannot
do (fusing q, k and v, transposing, reordering rotary rows) stays in each architecture's module.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

from lmforge.errors import DataError
from lmforge.hf.common import Rules, State

SPECIAL = ".^$*+?{}[]|()"  # what a regex escapes to mean itself


class Group(NamedTuple):
    number: int  # the capturing group's number in the HF pattern
    pattern: str  # its sub-pattern, which the reference must match in our name


Piece = str | Group  # literal text of an HF name, or the text a capturing group matched


class Backward(NamedTuple):
    ours: re.Pattern  # our names this rule produces, each reference a named group `g<number>`
    hf: tuple[Piece, ...]  # the HF name to write


def _closing(pattern: str, start: int) -> int:
    """Index of the ')' that closes the '(' at `start`."""
    depth, i = 0, start
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        depth += {"(": 1, ")": -1}.get(pattern[i], 0)
        if depth == 0:
            return i
        i += 1
    raise ValueError(f"rename rule {pattern!r}: unbalanced parentheses")


def pieces(pattern: str) -> list[Piece]:
    """The HF pattern as literal text and capturing groups; ValueError where it has no one text."""
    out: list[Piece] = []
    i, number = 0, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            escaped = pattern[i + 1 : i + 2]
            if len(escaped) != 1 or escaped not in SPECIAL + "\\":
                raise ValueError(f"rename rule {pattern!r}: \\{escaped} outside a group has no one text")
            out.append(escaped)
            i += 2
        elif char == "(":
            end = _closing(pattern, i)
            inner, i = pattern[i + 1 : end], end + 1
            quantified = i < len(pattern) and pattern[i] in "?*+{"
            if inner.startswith("?:"):
                if not (quantified and pattern[i] == "?"):
                    raise ValueError(f"rename rule {pattern!r}: ({inner}) has no one text")
                if "(" in inner.replace("(?:", ""):
                    raise ValueError(f"rename rule {pattern!r}: a capturing group inside an optional one")
                i += 1  # an optional group is written without its text
            elif inner.startswith("?") or quantified:
                raise ValueError(f"rename rule {pattern!r}: ({inner}) is not a plain capturing group")
            else:
                number += 1
                out.append(Group(number, inner))
        elif char in SPECIAL:
            raise ValueError(f"rename rule {pattern!r}: {char!r} outside a group has no one text")
        else:
            out.append(char)
            i += 1
    return out


def backward(pattern: str, replacement: str) -> Backward:
    """One rule read backwards; ValueError where it cannot be."""
    parts = pieces(pattern)
    groups = {piece.number: piece.pattern for piece in parts if isinstance(piece, Group)}
    regex, seen = "", set()
    for i, text in enumerate(re.split(r"\\(\d+)", replacement)):
        if i % 2 == 0:
            regex += re.escape(text)
            continue
        number = int(text)
        regex += f"(?P=g{number})" if number in seen else f"(?P<g{number}>{groups[number]})"
        seen.add(number)
    if set(groups) - seen:
        raise ValueError(
            f"rename rule {pattern!r}: group {min(set(groups) - seen)} is not in {replacement!r}"
        )
    return Backward(re.compile(regex), tuple(parts))


def readable(rules: Rules) -> list[Backward]:
    """The rules that can be read backwards, in their order."""
    out = []
    for pattern, replacement in rules:
        if isinstance(replacement, str):
            try:
                out.append(backward(pattern, replacement))
            except ValueError:
                continue
    return out


def backwards(state: Mapping[str, object], rules: Rules) -> State:
    """`state` under the HF names that `rules` rename onto its names (the first rule that matches)."""
    table = readable(rules)
    out = {}
    for name, tensor in state.items():
        for rule in table:
            match = rule.ours.fullmatch(name)
            if match:
                hf = "".join(p if isinstance(p, str) else match[f"g{p.number}"] for p in rule.hf)
                if hf in out:
                    raise DataError(
                        f"hf export: {name} and another tensor both become {hf}; expected one each"
                    )
                out[hf] = tensor
                break
        else:
            raise DataError(
                f"hf export: no rename rule writes {name}; expected the architecture to refuse a model "
                "with this parameter (its *_mismatches) or a rule for it"
            )
    return out  # type: ignore[return-value]


def prefixed(state: State, prefix: str, outside: tuple[str, ...] = ()) -> State:
    """HF names under the base model's attribute (`bert.`), except the heads named in `outside`."""
    return {(name if name.startswith(outside) else prefix + name): tensor for name, tensor in state.items()}
