"""The `findings` stage: every claim of `claims.CLAIMS` tested on the committed reports, written to
{out} (markdown), {out}.json (verdicts and numbers) and a figure folder beside them, and logged to MLflow.

A claim whose report is missing or differs from the experiments' lock (evidence.py) is "not tested",
with the reason; one that read an experiment lagging the code is marked stale, with that experiment's
commit and what changed since. The stage itself fails only on a report that exists but cannot be read.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from pathlib import Path

from lmforge.findings.claims import CLAIMS
from lmforge.findings.config import FindingsConfig, findings_config
from lmforge.findings.evidence import Evidence, MissingEvidence
from lmforge.findings.rules import NOT_TESTED, PART_VERDICTS, VERDICTS, Finding
from lmforge.io import write_json, write_text
from lmforge.stage import Plan, StageResult, read


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class FindingsPlan(Plan):
    """The `findings` stage's plan."""

    findings: FindingsConfig = read(findings_config)


def run(plan: FindingsPlan) -> StageResult:
    cfg = plan.findings
    out = Path(cfg.out)
    figures = out.with_suffix("")  # reports/findings/ beside reports/findings.md
    evidence = Evidence(cfg.reports_dir, cfg.experiments_lock, cfg.experiments_stale)
    findings: dict[str, Finding] = {}
    stale: dict[str, dict[str, str]] = {}  # claim -> {experiment stage: its mark}
    for key, claim in CLAIMS.items():
        evidence.stale = {}
        try:
            findings[key] = claim.test(evidence, cfg, figures)
        except MissingEvidence as err:
            findings[key] = Finding(NOT_TESTED, str(err))
        except (KeyError, StopIteration) as err:  # a report older than the claim's code
            findings[key] = Finding(
                NOT_TESTED,
                f"its reports lack the field {err!s} that this rule reads; rerun the stage that writes them",
            )
        stale[key] = dict(sorted(evidence.stale.items()))
    counts = Counter(f.verdict for f in findings.values())
    parts = Counter(p.verdict for f in findings.values() for p in f.parts)
    record = {
        "counts": {v: counts.get(v, 0) for v in VERDICTS},  # claims by verdict
        "part_counts": {v: parts.get(v, 0) for v in (*PART_VERDICTS, NOT_TESTED)},
        "claims": {
            key: {
                "statement": CLAIMS[key].statement,
                "verdict": f.verdict,
                "headline": f.headline,
                "parts": {p.name: {"verdict": p.verdict, "note": p.note} for p in f.parts},
                "because": f.because,
                "numbers": dict(f.numbers),
                "figure": str(f.figure) if f.figure else None,
                "needed": f.needed,
                "stale": stale[key],
            }
            for key, f in findings.items()
        },
        "sources": evidence.read,
    }
    write_json(out.with_suffix(".json"), record)
    write_text(out, markdown(findings, stale, evidence, out))
    metrics = {f"claims_{v.replace(' ', '_')}": float(n) for v, n in record["counts"].items()}
    metrics |= {f"parts_{v.replace(' ', '_')}": float(n) for v, n in record["part_counts"].items()}
    metrics["stale_claims"] = float(sum(bool(s) for s in stale.values()))  # beside the verdicts' counts
    own = sorted(str(f.figure) for f in findings.values() if f.figure and Path(f.figure).parent == figures)
    files = [str(out), str(out.with_suffix(".json")), *own]  # other stages' figures are only linked
    return StageResult(metrics, files)


def markdown(
    findings: dict[str, Finding], stale: dict[str, dict[str, str]], evidence: Evidence, out: Path
) -> str:
    def link(path: Path) -> str:
        return os.path.relpath(path, out.parent)

    lines = [
        "# Findings: the course's claims, tested on the models this pipeline trained",
        "",
        "Written by `dvc repro findings` (pipelines/findings.py) from the reports "
        "listed at the end. Each claim is decided part by part (a task, a backbone, a decoder), each "
        "part reproduced, refuted, not distinguishable (its interval covers the threshold) or not "
        "identified, by the rule in `src/lmforge/findings/claims.py`; intervals are 95% (over seeds "
        "unless a row says otherwise). Reports of pipelines/experiments/ are read only while they match "
        "what its dvc.lock pins. A claim marked **stale** read an experiment that lags the code: its "
        "verdict and numbers are that experiment's last measurement, at the commit named, until "
        "`make catch-up` reruns it.",
        "",
        "| claim | verdict |",
        "|---|---|",
        *[
            f"| [{CLAIMS[k].title}](#{k}) | {f.headline}{' (**stale**)' if stale[k] else ''} |"
            for k, f in findings.items()
        ],
        "",
    ]
    for key, f in findings.items():
        claim = CLAIMS[key]
        lines += [
            f'<a id="{key}"></a>',
            f"## {claim.statement}",
            "",
            f"**Verdict: {f.headline}**",
            "",
            *[f"**Stale** (`{stage}`): {mark}." for stage, mark in stale[key].items()],
            *([""] if stale[key] else []),
            f"{'Rule' if f.parts else 'Why'}: {f.because}.",
            "",
            f"Experiment: {claim.experiment}.",
            "",
        ]
        if f.parts:
            lines += ["| part | verdict | measured |", "|---|---|---|"]
            lines += [f"| {p.name} | {p.verdict} | {p.note} |" for p in f.parts] + [""]
        if f.numbers:
            lines += ["| quantity | value |", "|---|---|", *[f"| {q} | {v} |" for q, v in f.numbers], ""]
        if f.figure is not None:
            lines += [f"![{key}]({link(f.figure)})", ""]
        if f.needed:
            lines += [f"What would be needed: {f.needed}.", ""]
    lines += ["## Sources", "", *[f"- `{path}`" for path in evidence.read], ""]
    return "\n".join(lines)
