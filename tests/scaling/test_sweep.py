"""The sweep end to end, through its entry point: killed mid-way and started again it trains only the
unfinished cells, continues the cut one from its checkpoint, ends with the table of an uninterrupted
sweep and logs every cell once to MLflow under one parent; shards run through Hydra's submitit
launcher (local executor) fill the store for the full job; bad input is one line, exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import SCALING_TINY as TINY
from helpers import entry_stage, fails_in_one_line, scaling_config

ROOT = Path(__file__).resolve().parents[2]


def _sweep(workspace: Path, *args: str, uri: str | None = None) -> subprocess.Popen:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    tracking = ["logger=mlflow", f"logger.tracking_uri={uri}"] if uri else []
    flags = [a for a in args if a.startswith("--")]  # Hydra's flags come before the overrides
    overrides = [a for a in args if not a.startswith("--")]
    command = [
        sys.executable,
        str(ROOT / "pipelines" / "scaling_sweep.py"),
        *flags,
        *TINY,
        *tracking,
        *overrides,
    ]
    return subprocess.Popen(
        command, cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, (out + err)[-3000:]
    return out


def _metric(output: str, name: str) -> int:
    return int(float(next(line.split()[1] for line in output.splitlines() if line.startswith(f"{name}:"))))


def _table(workspace: Path, name: str) -> list[dict]:
    rows = json.loads((workspace / "reports/scaling" / name / "cells.json").read_text())["cells"]
    return [{k: r[k] for k in ("name", "key", "tokens", "flops", "val_loss", "val_accuracy")} for r in rows]


@pytest.mark.slow
def test_a_killed_sweep_continues_and_matches_an_uninterrupted_one(workspace):
    whole = _finish(_sweep(workspace, "scaling.name=whole", "scaling.store=store-whole"))
    assert _metric(whole, "cells_trained") == 6

    uri = f"sqlite:///{workspace}/sweep.db"
    store = workspace / "store-killed"
    proc = _sweep(workspace, "scaling.name=killed", "scaling.store=store-killed", uri=uri)
    deadline = time.time() + 300
    while proc.poll() is None and time.time() < deadline:  # one cell done, the next one cut mid-way
        done = list(store.glob("*/result.json"))
        if done and any(store.glob("*/last.ckpt")):
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = len(list(store.glob("*/result.json")))
    assert 1 <= finished < 6

    rerun = _finish(_sweep(workspace, "scaling.name=killed", "scaling.store=store-killed", uri=uri))
    assert _metric(rerun, "cells_trained") == 6 - finished
    assert _metric(rerun, "cells_reused") == finished
    assert _table(workspace, "killed") == _table(workspace, "whole")  # same keys, same losses, bit for bit
    rows = json.loads((workspace / "reports/scaling/killed/cells.json").read_text())["cells"]
    assert not {"resumed", "wall_seconds", "tokens_per_second"} & {k for r in rows for k in r}  # no clock
    clock = json.loads((workspace / "reports/timings/scaling/killed.json").read_text())["cells"]
    assert sum(c["resumed"] for c in clock.values()) >= 1  # the cut cell continued its checkpoint
    assert all(c["wall_seconds"] > 0 for c in clock.values())

    again = _finish(_sweep(workspace, "scaling.name=killed", "scaling.store=store-killed", uri=uri))
    assert _metric(again, "cells_trained") == 0

    import mlflow

    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    parents = [r for r in runs if r.data.tags.get("lmforge_job") == "scaling_sweep@killed-0of1"]
    children = [r for r in runs if "lmforge_cell" in r.data.tags]
    assert len(parents) == 1  # the rerun continued the killed sweep's parent run
    assert len(children) == 6 and len({r.data.tags["lmforge_cell"] for r in children}) == 6
    assert {r.info.status for r in children} == {"FINISHED"}
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    assert all("cell/val_loss" in r.data.metrics and "flops" in r.data.params for r in children)


@pytest.mark.slow
def test_shards_through_the_submitit_local_launcher_fill_the_store(workspace):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    two = [
        "scaling.sizes=[1]",
        "scaling.tokens=[512,1024]",
        "scaling.name=shards",
        "scaling.store=store-shards",
    ]
    proc = _sweep(
        workspace,
        "--multirun",
        "hydra/launcher=submitit_local",
        "hydra.launcher.timeout_min=10",
        "scaling.shards=2",
        "scaling.shard=0,1",
        f"hydra.sweep.dir={workspace}/multirun-shards",
        *two,
    )
    _finish(proc)
    results = list((workspace / "store-shards").glob("*/result.json"))
    assert len(results) == 2  # one cell per shard, each in its own process
    logs = list((workspace / "multirun-shards").rglob("*_log.out"))
    assert len(logs) == 2
    collect = _finish(_sweep(workspace, *two))
    assert _metric(collect, "cells_trained") == 0 and _metric(collect, "cells_reused") == 2
    assert len(_table(workspace, "shards")) == 2


def _fails(capsys, script: str, *overrides: str) -> str:
    return fails_in_one_line(capsys, entry_stage(script), scaling_config(*overrides))


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["scaling.sizes=[{n_layers: 2, d_model: 20, n_heads: 3}]"], "cannot be built"),
        (["scaling.tokens=[100000000]"], "exceeds the"),
        (["scaling.shard=2"], "scaling.shard: got 2, expected 0 <= shard < shards=1"),
        (["scaling.isoflop=[{flops: 1.0e+9, sizes: [1, 2]}]"], "at least 3 sizes"),
        (["optim.warmup_steps=4"], "L1-d8-D512: 4 steps, expected more than optim.warmup_steps=4"),
    ],
)
def test_bad_sweeps_are_one_line_before_any_cell_trains(in_workspace, capsys, overrides, needle):
    assert needle in _fails(capsys, "scaling_sweep", "scaling.store=store-bad", *overrides)
    assert not (in_workspace / "store-bad").exists() or not any((in_workspace / "store-bad").iterdir())
