"""A claim the findings report tests, as one row (`Claim`), and the one engine that turns a row into a
finding (`Claim.test`): the row's reader (findings/measures.py) turns its reports into parts, its
rule gives each decided part a verdict (reproduced, refuted, not distinguishable, not identified),
and the claim's verdict is the parts' one verdict, or "mixed"; no decided part -> "not tested".
The rows themselves are findings/claims.py's table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmforge.findings.config import FindingsConfig
from lmforge.findings.evidence import Evidence
from lmforge.findings.rules import MIXED, NOT_TESTED, REPRODUCED, Finding, Measured, Part, PartVerdict

Rule = Callable[[Part, FindingsConfig], str]  # a decided part -> its verdict
Reader = Callable[[Evidence, "Claim", FindingsConfig, Path], Measured]  # reports -> parts, numbers, figure


@dataclass(frozen=True)
class Claim:
    key: str
    title: str  # a few words, for the report's table
    statement: str  # the claim in one sentence, with its source
    experiment: str  # the stage(s), config and command that test it
    sources: Mapping[str, str]  # name -> a report (or figure) path under reports/
    read: Reader  # the reports -> parts, numbers, figure
    rule: Rule  # a decided part -> reproduced, refuted, not distinguishable or not identified
    judged: str  # how the rule judges a part, in one sentence
    untested: str  # why, when no part can be decided
    needed: str = ""  # what would be needed, where a part is not reproduced
    needed_untested: str = ""  # ... when it is not tested
    keys: Mapping[str, Any] = field(default_factory=dict)  # report keys and words its reader reads
    figure: str = ""  # the findings' own figure of it, under reports/findings/

    def test(self, ev: Evidence, cfg: FindingsConfig, figures: Path) -> Finding:
        measured = self.read(ev, self, cfg, figures)
        parts = [
            PartVerdict(p.name, self.rule(p, cfg) if p.informative else NOT_TESTED, p.note)
            for p in measured.parts
        ]
        decided = {p.verdict for p in parts if p.verdict != NOT_TESTED}

        def say(text: str) -> str:
            return text.format(cfg=cfg, **measured.words)

        found = (measured.numbers, measured.figure)
        if not decided:
            return Finding(NOT_TESTED, say(self.untested), *found, self.needed_untested or None, parts)
        verdict = decided.pop() if len(decided) == 1 else MIXED
        needed = self.needed if verdict != REPRODUCED else ""
        return Finding(verdict, say(self.judged), *found, needed or None, parts)
