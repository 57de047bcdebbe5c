"""`door.is_rank_zero`: Lightning's rank once Lightning set it, else the launcher's environment,
and a stage that does not train never imports Lightning to find out."""

from __future__ import annotations

import subprocess
import sys

import pytest
from lightning_utilities.core.rank_zero import rank_zero_only

from lmforge.door import RANK_VARIABLES, is_rank_zero


@pytest.fixture
def no_rank(monkeypatch):
    """As in a process where Lightning was never imported: no rank set, no launcher variables."""
    monkeypatch.delattr(rank_zero_only, "rank", raising=False)
    for name in RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_without_a_launcher_the_process_is_rank_zero(no_rank):
    assert is_rank_zero()


@pytest.mark.parametrize("name", RANK_VARIABLES)
def test_the_launchers_rank_variables_decide(no_rank, name):
    no_rank.setenv(name, "1")
    assert not is_rank_zero()
    no_rank.setenv(name, "0")
    assert is_rank_zero()


def test_the_first_variable_lightning_reads_wins(no_rank):
    no_rank.setenv("RANK", "0")
    no_rank.setenv("LOCAL_RANK", "3")
    assert is_rank_zero()


def test_lightnings_rank_wins_once_set(no_rank):
    no_rank.setenv("RANK", "0")
    no_rank.setattr(rank_zero_only, "rank", 2, raising=False)
    assert not is_rank_zero()


def test_asking_does_not_import_lightning():
    code = (
        "import sys; from lmforge.door import is_rank_zero; is_rank_zero(); print('lightning' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr[-2000:]
