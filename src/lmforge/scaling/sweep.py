"""The `scaling_sweep` stage: train every cell of the grid that the store does not hold yet.

Each cell's result lives in the content-addressed store (`scaling.store`, see `lmforge.scaling.cell`),
so a sweep killed at any point and started again trains only the unfinished cells (the one that was
cut continues from its last checkpoint) and creates no second MLflow run for any cell
(`lmforge.tracking.cells`). Everything is checked before the first cell trains: every shape builds,
and no cell's D exceeds the corpus's unique training tokens unless `scaling.allow_repetition`.

Past one process the same cells are split into shards (`scaling.shards=N scaling.shard=0..N-1`,
cell i goes to shard i % N), run by Hydra's launchers (submitit: SLURM or local processes) or by
`dvc exp run --queue` workers sharing one store (`LMFORGE_SCALING_STORE`); a shard only fills the
store. The full job (shards=1, what `dvc repro` runs) then finds every cell finished and writes the
table `{reports_dir}/cells.csv` (and cells.json) that the fit reads.

The table flags the cells that never left the unigram plateau (`plateau`): their held-out loss is
within `scaling.plateau_margin` nats of the unigram baseline's on the same held-out tokens (the
training split's token frequencies, `lmforge.evaluation.baseline`), or their accuracy equals the
baseline's to within COLLAPSED (they predict the most frequent token everywhere). cells.json keeps
the baseline beside the rows; the fit leaves flagged cells out and says how many.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import time
from pathlib import Path
from typing import Any, NamedTuple

from lmforge.data.encoded import EncodedSplit
from lmforge.errors import ConfigError, DataError
from lmforge.evaluation.baseline import UnigramBaseline
from lmforge.io import exclusive, sha256_files, write_json, write_text
from lmforge.model.config import ModelConfig, model_config
from lmforge.scaling import cell as cells_mod
from lmforge.scaling.config import ScalingConfig, scaling_config
from lmforge.scaling.grid import Cell, cells, check_capacity, code_fingerprint, keyed
from lmforge.stage import Plan, StageResult, read, seed_value
from lmforge.structured import plain
from lmforge.timings import write_timings
from lmforge.tokenizer.config import TokenizerConfig, tokenizer_config
from lmforge.tokenizer.specials import load_tokenizer, special_token_ids
from lmforge.tracking import active_run
from lmforge.training.config import (
    ObjectiveConfig,
    OptimConfig,
    TrainerConfig,
    objective_config,
    optim_config,
    trainer_config,
)
from lmforge.training.objectives import OBJECTIVES
from lmforge.training.pretrain import encoded_inputs, tokenizer_paths

COLUMNS = (
    "name", "kind", "budget", "n_layers", "d_model", "n_heads", "d_ff", "params_total",
    "params_non_embedding", "tokens", "steps", "flops", "flops_6nd", "flops_6nd_non_embedding",
    "lr", "seed", "val_loss", "val_accuracy", "plateau", "eval_tokens", "key",
)  # fmt: skip
COLLAPSED = 1e-4  # |accuracy - unigram accuracy| below this: one token predicted everywhere
BASELINE_BATCH = 4096  # sequences per batch while counting the training split's targets


class Sweep(NamedTuple):
    setting: cells_mod.Setting
    cells: list[Cell]  # every cell of the sweep
    mine: list[Cell]  # this shard's
    store: Path


def make_sweep(plan: SweepPlan) -> Sweep:
    """Check the whole sweep before anything trains (see the module docstring)."""
    scaling, objective, optim, trainer = plan.scaling, plan.objective, plan.optim, plan.trainer
    tokenizer_file, encoded_dir = tokenizer_paths(plan.tokenizer)
    tokenizer = load_tokenizer(tokenizer_file)
    specials, vocab_size = special_token_ids(tokenizer), tokenizer.get_vocab_size()
    base = dataclasses.replace(plan.model, vocab_size=vocab_size, pad_token_id=specials.pad)
    family = OBJECTIVES[objective.kind].family
    if plan.model.family is not family:
        raise ConfigError(
            f"model.family: got {base.family.value} for objective.kind={objective.kind.value}, expected {family.value}"
        )
    grid = cells(scaling, base, objective, optim.lr, plan.seed)
    short = [c for c in grid if c.steps <= optim.warmup_steps]
    if short:
        raise ConfigError(
            f"scaling cell {short[0].name}: {short[0].steps} steps, expected more than "
            f"optim.warmup_steps={optim.warmup_steps} (every cell's fixed warmup)"
        )
    setting = cells_mod.Setting(
        scaling, objective, optim, trainer, specials, vocab_size, encoded_dir, plan.seed
    )
    for split in ("train", "val"):
        EncodedSplit(encoded_dir, split)  # a missing or corrupt array: one line, before training
    unique = len(cells_mod.datamodule(setting, Path(scaling.store)).dataset("train")) * scaling.seq_len
    check_capacity(grid, unique, scaling, encoded_dir)
    data = sha256_files([tokenizer_file, *sorted(p for p in encoded_dir.iterdir() if p.is_file())])
    context = {
        "objective": plain(objective),
        "optim": plain(optim),
        "batching": [scaling.batch_size, scaling.seq_len],
        "eval": [scaling.eval_tokens, scaling.eval_batch_size],
        "precision": trainer.precision,
        "gradient_clip_val": trainer.gradient_clip_val,
        "data": data,
        "code": code_fingerprint(),
    }
    grid = keyed(grid, context)
    mine = [c for c in grid if c.index % scaling.shards == scaling.shard]
    return Sweep(setting, grid, mine, Path(scaling.store))


def will_resume(plan: SweepPlan) -> bool:
    """Whether this job continues an earlier one: a cell of it is in the store, finished or not
    (MLflow then continues the earlier job's parent run)."""
    try:
        sweep = make_sweep(plan)
    except (ConfigError, DataError, OSError):
        return False  # run() reports the problem
    return any((sweep.store / c.key).is_dir() for c in sweep.mine)


def read_result(folder: Path) -> dict[str, Any] | None:
    path = folder / "result.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError:
        raise DataError(
            f"{path} is not valid JSON; expected a cell result (delete the folder to rerun it)"
        ) from None


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class SweepPlan(Plan):
    """The `scaling_sweep` stage's plan."""

    scaling: ScalingConfig = read(scaling_config)
    tokenizer: TokenizerConfig = read(tokenizer_config)
    model: ModelConfig = read(model_config)  # the base of every cell (its shape comes from the grid)
    objective: ObjectiveConfig = read(objective_config)
    optim: OptimConfig = read(optim_config)
    trainer: TrainerConfig = read(trainer_config)
    seed: int = read(seed_value)


def run(plan: SweepPlan) -> StageResult:
    sweep = make_sweep(plan)
    scaling: ScalingConfig = sweep.setting.scaling
    tracking = active_run()
    runs = None
    if tracking is not None:
        from lmforge.tracking.cells import CellRuns

        runs = CellRuns(*tracking)
    started = time.perf_counter()
    results, trained = [], 0
    for i, cell in enumerate(sweep.mine, start=1):
        folder = sweep.store / cell.key
        result = read_result(folder)
        if result is None:
            with exclusive(sweep.store / f".{cell.key}.lock", f"scaling cell {cell.name} ({folder})"):
                result = read_result(folder)  # another job may have finished it meanwhile
                if result is None:
                    folder.mkdir(parents=True, exist_ok=True)
                    write_json(folder / "cell.json", {**cell.describe(), "model": cell.model.to_dict()})
                    run_id = runs.open(cell, "trained")[0] if runs else None
                    print(
                        f"[{i}/{len(sweep.mine)}] {cell.name}: {cell.steps} steps, {cell.flops:.3g} FLOPs",
                        flush=True,
                    )
                    result, timing = cells_mod.train(
                        cell, sweep.setting, folder, run_id, tracking[1] if tracking else None
                    )
                    cells_mod.save_result(folder, result, timing)
                    trained += 1
                    if runs:
                        runs.finish(run_id, {**result, **timing})
                    print(
                        f"    val_loss {result['val_loss']:.4f}, {timing['wall_seconds']:.1f} s", flush=True
                    )
        elif runs:
            run_id, finished = runs.open(cell, "store")
            if not finished:
                runs.finish(run_id, {**result, **cells_mod.read_timing(folder)})
        results.append(result)
    timings = {cell.name: cells_mod.read_timing(sweep.store / cell.key) for cell in sweep.mine}
    metrics = {
        "cells": len(sweep.mine),
        "cells_trained": trained,
        "cells_reused": len(sweep.mine) - trained,
    }
    clock = {  # lmforge.timings: MLflow and the sweep's timings file, never cells.json
        "sweep_seconds": time.perf_counter() - started,
        "cell_train_seconds": sum(t.get("wall_seconds", 0.0) for t in timings.values()),
    }
    inputs = encoded_inputs(sweep.setting.encoded_dir)  # what every cell trains on: MLflow run inputs
    if scaling.shards > 1:  # a shard fills the store; the full job writes the table
        return StageResult({**metrics, **clock}, [], inputs=inputs)
    baseline = unigram_baseline(sweep.setting)
    results = [flag_plateau(r, baseline, scaling.plateau_margin) for r in results]
    metrics["cells_on_plateau"] = sum(r["plateau"] for r in results)
    reports = Path(scaling.reports_dir)
    write_text(reports / "cells.csv", table(results))
    write_json(
        reports / "cells.json",
        {"cells": results, "baseline": baseline, "plateau_margin": scaling.plateau_margin},
    )
    write_timings(reports, {**clock, "cells": timings})
    return StageResult({**metrics, **clock}, [str(reports / "cells.csv")], inputs=inputs)


def unigram_baseline(setting: cells_mod.Setting) -> dict[str, float]:
    """The unigram baseline's loss and accuracy on the held-out tokens every cell is measured on:
    target frequencies counted over the whole training split (add-one smoothed)."""
    s = setting.scaling
    data = cells_mod.datamodule(setting, Path(s.store))
    targets = OBJECTIVES[setting.objective.kind].targets

    def batches(split: str, n: int, size: int):
        dataset = data.dataset(split)
        for start in range(0, n, size):
            yield data.collate([dataset[i] for i in range(start, min(n, start + size))])

    train = data.dataset("train")
    counts = UnigramBaseline(setting.vocab_size).fit(batches("train", len(train), BASELINE_BATCH), targets)
    held_out = min(len(data.dataset("val")), max(1, s.eval_tokens // s.seq_len))  # as cell.evaluate reads
    scores = counts.score(batches("val", held_out, s.eval_batch_size), targets)
    return {"loss": scores["loss"], "accuracy": scores["accuracy"], "n_tokens": scores["n_tokens"]}


def flag_plateau(row: dict[str, Any], baseline: dict[str, float], margin: float) -> dict[str, Any]:
    """`row` with `plateau`: its loss within `margin` of the unigram loss, or its accuracy the unigram's."""
    flat = row["val_loss"] >= baseline["loss"] - margin
    collapsed = abs(row["val_accuracy"] - baseline["accuracy"]) < COLLAPSED
    return {**row, "plateau": bool(flat or collapsed)}


def table(results: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in results:
        writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
    return out.getvalue()
