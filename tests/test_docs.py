"""The README is the front door and docs/ holds the rooms: the README stays short, keeps the two
set-up commands, links every docs page, and no relative link in README.md or docs/*.md points at
nothing. Fast: reads Markdown and `git ls-files`, trains nothing."""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
MAX_README_LINES = 250

# DVC outputs: absent from a clean clone. Links into reports/ must name committed files (reports/
# is committed in git here); links into artifacts/ and data/ cannot be checked and are skipped.
COMMITTED_OUTPUTS = ("reports",)
UNCHECKED_OUTPUTS = ("artifacts", "data")

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"`+[^`]*`+")
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:, ...


def links(page: Path) -> list[str]:
    """Link targets of a Markdown file, outside fenced code blocks and inline code spans."""
    found, fenced = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        text = CODE_SPAN.sub("", line)
        found += INLINE_LINK.findall(text)
        found += REFERENCE_DEF.findall(text)
    return found


def local_target(page: Path, target: str) -> Path | None:
    """The repository path a relative link points at, or None for external and anchor-only links."""
    if EXTERNAL.match(target) or target.startswith("#"):
        return None
    path = unquote(target.split("#", 1)[0].split("?", 1)[0])
    return (page.parent / path).resolve()


@cache
def committed() -> frozenset[str] | None:
    """Files git tracks (deleted in the working tree or not); None outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return frozenset(name for name in out.split("\0") if name)


def is_committed(relative: str) -> bool:
    files = committed()
    if files is None:  # a source tree without git: fall back to what is on disk
        return (ROOT / relative).exists()
    return relative in files or any(name.startswith(relative.rstrip("/") + "/") for name in files)


def broken(page: Path, target: str) -> str | None:
    """Why a link is broken, or None when it resolves (or cannot be checked)."""
    path = local_target(page, target)
    if path is None:
        return None
    try:
        relative = path.relative_to(ROOT).as_posix()
    except ValueError:
        return "points outside the repository"
    top = relative.split("/", 1)[0]
    if top in UNCHECKED_OUTPUTS:
        return None
    if top in COMMITTED_OUTPUTS:
        return None if is_committed(relative) else f"{relative} is not a committed file or folder"
    return None if path.exists() else f"{relative} does not exist"


def test_readme_is_short_and_keeps_the_two_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines (at most {MAX_README_LINES})"
    assert any(line.startswith("make repro") for line in lines), "README.md lost its `make repro` line"
    assert any(line.startswith("make test ") for line in lines), "README.md lost its `make test` line"


def test_there_are_docs_pages():
    assert DOCS, "docs/ has no Markdown pages"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page):
    problems = [f"{target}: {why}" for target in links(page) if (why := broken(page, target))]
    assert not problems, f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(problems)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {local_target(README, target) for target in links(README)}
    missing = [page.relative_to(ROOT).as_posix() for page in DOCS if page.resolve() not in linked]
    assert not missing, f"README.md links no page for: {', '.join(missing)}"


def test_the_link_checker_sees_links_and_skips_code(tmp_path):
    """The checks above would pass vacuously if the parser found no links: prove it finds them."""
    page = tmp_path / "page.md"
    page.write_text(
        'See [a](a.md#part), ![b](img/b.png "title"), [web](https://example.org), [top](#top)\n'
        "and `[not](code.md)`.\n```\n[not](fenced.md)\n```\n[ref]: ref.md\n",
        encoding="utf-8",
    )
    assert links(page) == ["a.md#part", "img/b.png", "https://example.org", "#top", "ref.md"]
    assert local_target(page, "a.md#part") == (tmp_path / "a.md").resolve()
    assert local_target(page, "https://example.org") is None
    assert local_target(page, "#top") is None
    assert (
        broken(README, "reports/no-such-report.md")
        == "reports/no-such-report.md is not a committed file or folder"
    )
    assert broken(README, "artifacts/anything/best.ckpt") is None
    assert broken(README, "no-such-file.md") == "no-such-file.md does not exist"
    assert broken(README, "docs/") is None


HEADLINE_RUNS = {"`bert_micro_rope`": "encoder", "`gpt_micro`": "decoder", "`t5_tiny`": "encoder_decoder"}
LOSS_CELL = re.compile(r"([\d.]+) \(ppl (\d+)\)")


def test_the_headline_table_is_what_the_evaluate_stage_wrote():
    """README's results table against reports/eval/<run>.json: a rerun that moves a number fails here."""
    import json

    rows = [line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("| ")]
    checked = 0
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        run = next((r for model, r in HEADLINE_RUNS.items() if cells[1].startswith(model)), None)
        if run is None or len(cells) != 4:
            continue
        report = json.loads((ROOT / "reports/eval" / f"{run}.json").read_text())
        for cell, key in ((cells[2], "test"), (cells[3], "unigram")):
            loss, ppl = LOSS_CELL.fullmatch(cell).groups()
            assert loss == f"{report[f'{key}_loss']:.2f}", (run, key, cell)
            assert ppl == f"{report[f'{key}_perplexity']:.0f}", (run, key, cell)
        checked += 1
    assert checked == 3


def test_the_stage_times_are_what_the_timed_run_wrote():
    """docs/pipeline.md's per-stage table is `python3 -m benchmarks.stage_times --markdown` of the
    committed reports/bench/stage_times.json: a new timed run that is not carried into the page fails."""
    import importlib
    import json
    import sys

    sys.path.insert(0, str(ROOT))
    try:
        tool = importlib.import_module("benchmarks.stage_times")
    finally:
        sys.path.remove(str(ROOT))
    result = json.loads((ROOT / "reports/bench/stage_times.json").read_text())
    assert tool.markdown(result) in (ROOT / "docs/pipeline.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("sweep", ["default", "rope", "large"])
def test_the_scaling_summaries_in_the_docs_are_the_reports(sweep):
    """docs/scaling.md quotes each committed sweep's summary line (what its fit does and does not
    identify) as `law.md` wrote it: a rerun that changes the verdict fails until the page follows."""
    law = ROOT / "reports/scaling" / sweep / "law.md"
    line = law.read_text(encoding="utf-8").splitlines()[2]
    assert line.startswith("**Summary.** ")
    assert line.removeprefix("**Summary.** ") in (ROOT / "docs/scaling.md").read_text(encoding="utf-8")


def test_dvc_plots_render_with_no_network(tmp_path):
    """`dvc plots show` writes its page from the committed template, with Vega inlined: no script is
    fetched from a CDN, so the curves draw offline."""
    config = (ROOT / ".dvc" / "config").read_text()
    assert "html_template = plots/offline.html" in config
    template = (ROOT / ".dvc" / "plots" / "offline.html").read_text()
    assert "{plot_divs}" in template and "{scripts}" not in template  # DVC's CDN tags have nowhere to go
    assert not re.search(r"<script[^>]+src=", template)
    for library in ("vega 5.", "vega-lite 5.", "vega-embed 6."):
        assert f"/* {library}" in template
    out = subprocess.run(
        [sys.executable, "-m", "dvc", "plots", "show", "-o", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    page = (tmp_path / "index.html").read_text()
    assert "cdn.jsdelivr" not in page and "vegaEmbed" in page


def test_the_findings_headline_in_the_readme_is_the_report_s():
    """README's claim/verdict table against reports/findings.md's (its anchors made relative to the
    README): a findings rerun that flips a verdict fails here until the README follows."""
    report = (ROOT / "reports/findings.md").read_text(encoding="utf-8").splitlines()
    readme = README.read_text(encoding="utf-8").splitlines()

    def table(lines: list[str]) -> list[str]:
        start = lines.index("| claim | verdict |")
        end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
        return lines[start:end]

    expected = [line.replace("](#", "](reports/findings.md#") for line in table(report)]
    assert len(expected) >= 2 + 11 and table(readme) == expected
