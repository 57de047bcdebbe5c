"""DVC's own cost per command: `dvc status` on this repository with ruamel's C parser against its
pure-Python one.

DVC loads dvc.yaml, dvc.lock and every params file a stage lists with ruamel's safe loader, which
parses in C only when `ruamel.yaml.clib` is installed; ruamel.yaml 0.19.1 no longer pulls it in, so
the project lists it. (The round-trip parse with which `dvc repro` rewrites the lock file after each
stage is pure Python either way.)
Both sides run the same `dvc status` in a fresh process; the peer's process hides the C extension
before DVC imports ruamel. The ratio is peer seconds over ours (higher is better).
"""

from __future__ import annotations

import subprocess
import sys
from importlib.util import find_spec

from benchmarks.common import Row, interleave, median

STATUS = "import sys\n{hide}from dvc.cli import main\nsys.exit(main(['status', '--quiet']))\n"
HIDE = "sys.modules['_ruamel_yaml'] = None  # ruamel then falls back to its pure-Python parser\n"


def status(hide_c_parser: bool) -> None:
    code = STATUS.format(hide=HIDE if hide_c_parser else "")
    # --quiet exits 1 when a stage is out of date: both sides see the same workspace, so it is not an error
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if result.returncode not in (0, 1):
        raise RuntimeError(f"dvc status failed: {result.stderr[-2000:]}")


def run(quick: bool) -> list[Row]:
    if find_spec("_ruamel_yaml") is None:
        raise RuntimeError("ruamel.yaml.clib is not installed: `pip install -e .` installs it")
    samples = interleave(
        {"c": lambda: status(False), "pure": lambda: status(True)},
        rounds=1 if quick else 3,
        warmup=0 if quick else 1,
    )
    ours, peer = median(samples["c"]), median(samples["pure"])
    return [
        Row(
            group="dvc",
            name="dvc status (this repository)",
            ours=60 / ours,
            peer=60 / peer,
            unit="runs/min",
            peer_name="ruamel pure-Python parser",
            extra={"seconds_c": ours, "seconds_pure": peer},
        )
    ]
