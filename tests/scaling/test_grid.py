"""The grid: the shape rule, token budgets in whole steps, IsoFLOP cells that spend their budget,
FLOPs from the shapes beside 6ND, content keys, and the bad inputs refused before anything trains."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import lmforge
from lmforge.codebase import module_code
from lmforge.errors import ConfigError, DataError
from lmforge.model.config import load_model_config
from lmforge.model.flops import training_flops
from lmforge.scaling.config import IsoFlopSlice, LrRule, ScalingConfig, SeedRepeats, ShapeRule
from lmforge.scaling.grid import CELL_MODULE, check_capacity, code_fingerprint, keyed, shape_of
from lmforge.scaling.grid import cells as grid_cells
from lmforge.training.config import ObjectiveConfig, ObjectiveKind

BASE = load_model_config(
    {"name": "gpt", "family": "decoder", "vocab_size": 512, "position": "learned", "max_seq_len": 32}
).to_dict()
CLM = ObjectiveConfig()


def config(**kw) -> ScalingConfig:
    values = dict(
        sizes=[1, 2, 3],
        tokens=[1024, 4096],
        batch_size=4,
        seq_len=32,
        shape=ShapeRule(16, 16, 4),
        min_steps=0,
    )
    return ScalingConfig(**(values | kw))


def cells(s: ScalingConfig, base: dict, objective: ObjectiveConfig, lr: float = 1e-3, seed: int = 7):
    return grid_cells(s, load_model_config(base), objective, lr, seed)


def test_the_shape_rule_fixes_the_aspect_ratio_and_head_width():
    s = config()
    assert shape_of(3, s, "x") == {"n_layers": 3, "d_model": 48, "n_heads": 3, "d_ff": 192}
    assert shape_of({"n_layers": 2, "d_model": 40, "n_heads": 5}, s, "x") == {
        "n_layers": 2, "d_model": 40, "n_heads": 5, "d_ff": 160,
    }  # fmt: skip


def test_grid_cells_count_tokens_in_whole_steps_and_flops_from_the_shapes():
    s = config(tokens=[1000, 4096])
    grid = cells(s, BASE, CLM)
    assert [c.name for c in grid[:2]] == ["L1-d16-D896", "L1-d16-D4.1k"]
    assert len(grid) == 6 and {c.kind for c in grid} == {"grid"}
    for cell in grid:
        assert cell.tokens == cell.steps * 4 * 32  # 1000 tokens -> 7 whole steps of 128
        per_step = training_flops(cell.model, 4, 32)
        assert cell.flops == cell.steps * per_step
        assert cell.flops_6nd == 6 * cell.params_total * cell.tokens
    # the vocabulary head and attention make the counted FLOPs exceed 6 N_non-embedding D at this size
    assert all(c.flops > c.flops_6nd_non_embedding for c in grid)


def test_isoflop_cells_spend_their_budget_and_merge_with_grid_cells():
    budget = float(cells(config(sizes=[2], tokens=[4096]), BASE, CLM)[0].flops)  # exactly one grid cell
    s = config(sizes=[2], tokens=[4096], isoflop=[IsoFlopSlice(budget, [1, 2, 3])])
    grid = cells(s, BASE, CLM)
    assert len(grid) == 3  # the slice's L2 cell is the grid cell
    merged = [c for c in grid if c.kind == "grid"]
    assert len(merged) == 1 and merged[0].budget == budget
    for cell in grid:
        step = cell.flops / cell.steps
        assert abs(cell.flops - budget) <= step / 2  # within half a step of the budget


def test_mlm_counts_the_head_on_the_selected_positions_only():
    encoder = BASE | {"family": "encoder", "head_transform": True}
    mlm = ObjectiveConfig(name="roberta", kind=ObjectiveKind.mlm)
    (cell,) = cells(config(sizes=[1], tokens=[1024]), encoder, mlm)
    c = cell.model
    assert cell.flops == cell.steps * training_flops(c, 4, 32, projected=round(0.15 * 128))


def test_a_shape_that_cannot_be_built_is_one_line():
    s = config(sizes=[{"n_layers": 2, "d_model": 20, "n_heads": 3}])
    with pytest.raises(ConfigError, match=r"scaling.sizes\[0\] \(shape .*d_model.: 20.*\) cannot be built"):
        cells(s, BASE, CLM)
    with pytest.raises(ConfigError, match=r"scaling.sizes\[0\]: got 'big'"):
        cells(config(sizes=["big"]), BASE, CLM)


def test_too_few_sizes_in_a_slice_and_an_empty_grid_are_refused():
    with pytest.raises(ConfigError, match="at least 3 sizes"):
        config(isoflop=[IsoFlopSlice(1e9, [1, 2])])
    with pytest.raises(ConfigError, match="expected a grid"):
        ScalingConfig()


def test_a_budget_larger_than_the_corpus_is_refused_unless_repetition_is_allowed(tmp_path):
    s = config()
    grid = cells(s, BASE, CLM)
    with pytest.raises(DataError, match=r"D=4,096 tokens exceeds the 3,000 unique training tokens"):
        check_capacity(grid, 3000, s, tmp_path)
    check_capacity(grid, 3000, dataclasses.replace(s, allow_repetition=True), tmp_path)
    check_capacity(grid, 4096, s, tmp_path)


def test_keys_address_the_cell_and_its_context():
    grid = cells(config(), BASE, CLM)
    first = keyed(grid, {"seed": 1, "data": "x"})
    assert len({c.key for c in first}) == len(grid)
    assert [c.key for c in keyed(grid, {"seed": 1, "data": "x"})] == [c.key for c in first]
    assert all(a.key != b.key for a, b in zip(first, keyed(grid, {"seed": 2, "data": "x"})))
    rope = cells(config(), BASE | {"position": "rope"}, CLM)
    assert all(a.key != b.key for a, b in zip(first, keyed(rope, {"seed": 1, "data": "x"})))


def test_the_code_fingerprint_covers_the_code_a_cell_imports_and_nothing_it_does_not():
    """A cell's key hashes what the cell module imports: the model, objectives and training loop are
    in, the code that only reports on a sweep (the fit, the plots) and observability are out."""
    code = {path.relative_to(Path(lmforge.__file__).parent).as_posix() for path in module_code(CELL_MODULE)}
    assert {"scaling/cell.py", "training/module.py", "model/stack.py", "io.py"} <= code
    assert not {"scaling/fit.py", "scaling/plots.py"} & code
    assert not any(name.startswith("tracking/") for name in code)
    assert len(code_fingerprint()) == 64


def test_a_cell_below_min_steps_is_refused_with_its_name():
    s = config(tokens=[1024, 4096], min_steps=20)  # 1024 tokens are 8 steps of 4 x 32
    with pytest.raises(
        ConfigError, match=r"scaling.sizes\[0\]: cell L1-d16-D1.02k trains 8 steps; expected at least"
    ):
        cells(s, BASE, CLM)
    assert min(c.steps for c in cells(config(tokens=[4096], min_steps=20), BASE, CLM)) == 32


def test_the_peak_rate_follows_the_width_rule():
    flat = cells(config(tokens=[4096]), BASE, CLM, lr=2e-3)
    assert {c.lr for c in flat} == {2e-3}  # exponent 0: one rate for every size
    scaled = cells(config(tokens=[4096], lr=LrRule(reference_d_model=32, exponent=1.0)), BASE, CLM, lr=2e-3)
    assert [c.lr for c in scaled] == pytest.approx([4e-3, 2e-3, 2e-3 * 32 / 48])  # d_model 16, 32, 48
    assert all(a.key != b.key for a, b in zip(keyed(flat, {}), keyed(scaled, {})) if a.lr != b.lr)


def test_seed_repeats_add_the_named_cells_under_each_seed():
    s = config(tokens=[4096], repeats=SeedRepeats(cells=["L1-d16-D4.1k", "L3-d48-D4.1k"], seeds=[7, 8, 9]))
    grid = cells(s, BASE, CLM, seed=7)
    assert [(c.name, c.seed) for c in grid[3:]] == [
        ("L1-d16-D4.1k", 8), ("L1-d16-D4.1k", 9), ("L3-d48-D4.1k", 8), ("L3-d48-D4.1k", 9),
    ]  # fmt: skip
    assert [c.index for c in grid] == list(range(7))
    assert len({c.key for c in keyed(grid, {})}) == 7  # a repeat is its own cell in the store
    with pytest.raises(ConfigError, match=r"scaling.repeats.cells: got \['L9-d1-D1'\], expected names"):
        cells(config(repeats=SeedRepeats(cells=["L9-d1-D1"], seeds=[1])), BASE, CLM)
    with pytest.raises(ConfigError, match="repeats.cells is empty"):
        config(repeats=SeedRepeats(seeds=[1]))
