"""scripts/relock.py records a stage's new code hashes only when it proves the change cannot move an
output: equal in form (docstrings, comments, layout), or a config that composes the same plan."""

from __future__ import annotations

import subprocess

import pytest
from repo_copy import copy_repository

from scripts.relock import code_status, record_code_deps, relock, same_form


def test_docstrings_comments_and_layout_are_form():
    before = b'"""A module."""\n\n\ndef f(x):\n    """Twice."""\n    return 2 * x  # double\n'
    after = b'"""A module, reworded."""\n\ndef f(x):\n    return 2 * x\n'
    assert same_form("a.py", before, after)
    assert not same_form("a.py", before, before.replace(b"2 * x", b"3 * x"))
    assert not same_form("a.py", before, before.replace(b"(x)", b"(y)"))
    assert not same_form("a.py", b"def f(:\n", b"def f(:\n ")  # unparsable: not proven


def test_a_yaml_file_is_its_value():
    assert same_form("c.yaml", b"# old\na: 1\nb: [1, 2]\n", b"a: 1  # new\nb:\n  - 1\n  - 2\n")
    assert not same_form("c.yaml", b"a: 1\n", b"a: 2\n")
    assert same_form("notes.txt", b"x", b"x") and not same_form("notes.txt", b"x", b"y")


@pytest.mark.slow
def test_a_comment_is_recorded_and_a_code_change_is_not(tmp_path):
    repo = copy_repository(tmp_path / "repo")
    record_code_deps(repo)  # the base: a lock that records its own code
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "commit", "-qam", "lock", "--allow-empty"], cwd=repo, check=True)
    config = repo / "src/lmforge/model/config.py"
    config.write_text(config.read_text() + "\n# a comment reruns nothing\n")
    evaluate = repo / "src/lmforge/evaluation/evaluate.py"
    evaluate.write_text(evaluate.read_text() + '\nprint("edited")\n')
    stale = code_status(repo)
    assert "pretrain@decoder" in stale and "evaluate@decoder" in stale

    recorded, refused = relock(repo)

    assert "pretrain@decoder" in recorded and "evaluate@decoder" not in recorded
    assert "src/lmforge/evaluation/evaluate.py changed" in refused["evaluate@decoder"]
    assert set(code_status(repo)) == set(refused)  # what was not proven still needs its rerun


def test_a_byte_change_to_the_code_that_keys_the_scaling_store_is_never_relocked_for_a_sweep(tmp_path):
    """The sweep writes its cells' keys, a hash of these files' bytes, into its reports: even a
    docstring edit there changes them, so a stage that runs the sweep needs its rerun."""
    from scripts.relock import _rekeyed

    for root in ("base", "now"):
        (tmp_path / root / "src/lmforge/training").mkdir(parents=True)
        (tmp_path / root / "src/lmforge/training/module.py").write_text('"""Doc."""\nX = 1\n')
    (tmp_path / "now/src/lmforge/training/module.py").write_text('"""Reworded."""\nX = 1\n')
    sweep, other = ["src/lmforge/scaling", "src/lmforge/training"], ["src/lmforge/training"]
    changed = "src/lmforge/training/module.py"
    assert _rekeyed(tmp_path / "base", tmp_path / "now", sweep) == changed
    assert _rekeyed(tmp_path / "base", tmp_path / "now", other) is None  # a form-only edit stays provable
    assert _rekeyed(tmp_path / "base", tmp_path / "base", sweep) is None
