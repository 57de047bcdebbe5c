"""The `positions_probe` stage: what a decoder with learned positions does past the length it trained on.

arch_eval finds learned positions losing less past their training length than RoPE and sinusoidal
(docs/findings.md#positions). The rows of a learned table past that length never received a gradient:
they hold their initialisation, shrunk by weight decay. So the question is whether the model extrapolates or simply
stops reading positions there. The probe answers it on the same test windows as arch_eval, by
evaluating one checkpoint with its table edited:

- `trained`: the table as trained (the rows past the training length only ever weight-decayed);
- `zero past`: the rows past the training length set to zero (no position signal there);
- `clamped`: those rows set to the last trained row (every later token "at" the last trained position);
- `zero all`: every row zero: how much the model relies on positions within its training length.

For each variant: the mean next-token loss within the training length and past it, in the longest
windows, and each variant minus `trained`, paired by window (`lmforge.stats.paired`). The table's row
norms, trained rows against untrained ones and against the norm the initialisation gives, show which
rows moved. Writes {out_dir}/probe.json and {out_dir}/summary.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from lmforge.architecture.stage import degradation
from lmforge.errors import ConfigError, DataError
from lmforge.interpret.data import text_windows
from lmforge.interpret.induction import token_losses
from lmforge.io import write_json, write_text
from lmforge.model.config import Position
from lmforge.stage import Plan, StageResult, read
from lmforge.stats import paired
from lmforge.structured import Group, rooted
from lmforge.tokenizer.config import TokenizerConfig, tokenizer_config
from lmforge.tokenizer.specials import load_tokenizer, special_token_ids
from lmforge.training.checkpoints import load_module
from lmforge.training.config import TrainConfig, train_config
from lmforge.training.pretrain import tokenizer_paths


@dataclass(frozen=True)
class ProbeConfig:
    run: str = "arch_learned"  # a run of {models_dir}/<run>/best.ckpt trained with learned positions
    models_dir: str = rooted("artifacts/pretrain", "${paths.artifacts}/pretrain")
    length: int = 512  # test windows, tokens: longer than train.seq_len, within the table
    max_windows: int | None = None  # null -> every window of the test split
    batch_size: int = 16
    out_dir: str = rooted("reports/positions_probe", "${paths.reports}/positions_probe")

    def __post_init__(self) -> None:
        if self.max_windows is not None and self.max_windows < 1:
            raise ConfigError(f"probe.max_windows: got {self.max_windows}, expected null or an integer >= 1")
        if self.batch_size < 1:
            raise ConfigError(f"probe.batch_size: got {self.batch_size}, expected an integer >= 1")


probe_config = Group(ProbeConfig, "probe")


def variants(table: torch.Tensor, trained: int) -> dict[str, torch.Tensor]:
    """The position tables the probe evaluates (see the module docstring), rows 0..trained-1 trained."""
    zero_past, clamped = table.clone(), table.clone()
    zero_past[trained:] = 0.0
    clamped[trained:] = table[trained - 1]
    return {"trained": table, "zero past": zero_past, "clamped": clamped, "zero all": torch.zeros_like(table)}


@dataclass(frozen=True, kw_only=True, eq=False)
class ProbePlan(Plan):
    """The `positions_probe` stage's plan."""

    probe: ProbeConfig = read(probe_config)
    tokenizer: TokenizerConfig = read(tokenizer_config)
    train: TrainConfig = read(train_config)


def run(plan: ProbePlan) -> StageResult:
    cfg: ProbeConfig = plan.probe
    trained = plan.train.seq_len
    path = Path(cfg.models_dir) / cfg.run / "best.ckpt"
    model = load_module(path).model
    if model.config.position is not Position.learned:
        raise DataError(
            f"probe.run: {path} has {model.config.position.value} positions; expected learned ones"
        )
    if not trained < cfg.length <= model.config.max_seq_len:
        raise ConfigError(
            f"probe.length: got {cfg.length}, expected more than train.seq_len={trained} and at most the "
            f"table's {model.config.max_seq_len} rows"
        )
    tokenizer_file, encoded_dir = tokenizer_paths(plan.tokenizer)
    eos = special_token_ids(load_tokenizer(tokenizer_file)).eos
    windows = text_windows(encoded_dir, cfg.length, eos, cfg.max_windows, cfg.batch_size)
    embedding = model.embeddings.pos.weight
    original = embedding.detach().clone()
    losses = {}
    with torch.no_grad():  # the model is this stage's own copy: its table is left as the last variant set it
        for name, table in variants(original, trained).items():
            embedding.copy_(table)
            losses[name] = token_losses(model, windows)
    norms = original.norm(dim=1)
    init_norm = model.config.init_std * model.config.d_model**0.5
    # each window's mean loss within the training length and past it, per variant
    split = {name: (t[:, : trained - 1].mean(1), t[:, trained - 1 :].mean(1)) for name, t in losses.items()}
    rows = []
    for name, tokens in losses.items():
        row = {
            "variant": name,
            "loss_within": split[name][0].mean().item(),
            "loss_past": split[name][1].mean().item(),
            "degradation": degradation(tokens, trained).mean().item(),
        }
        if name != "trained":
            for i, part in enumerate(("within", "past")):
                a, b = (dict(enumerate(split[n][i].tolist())) for n in (name, "trained"))
                row[f"{part}_minus_trained"] = paired(a, b, (name, "trained")).to_dict()
        rows.append(row)
    report = {
        "run": cfg.run,
        "train_length": trained,
        "length": cfg.length,
        "windows": int(losses["trained"].shape[0]),
        "row_norm_trained": norms[:trained].mean().item(),
        "row_norm_untrained": norms[trained : cfg.length].mean().item(),
        "row_norm_at_init": init_norm,
        "variants": rows,
    }
    out = Path(cfg.out_dir)
    write_json(out / "probe.json", report)
    write_text(out / "summary.md", render(report))
    metrics = {
        f"{r['variant'].replace(' ', '_')}/{k}": r[k] for r in rows for k in ("loss_within", "loss_past")
    }
    return StageResult(metrics, [str(out / "probe.json"), str(out / "summary.md")])


def _interval(d: dict | None) -> str:
    if d is None:
        return ""
    return f"{d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"


def render(report: dict) -> str:
    T, n = report["train_length"], report["length"]
    lines = [
        f"# Learned positions past their training length ({report['run']})",
        "",
        f"{report['windows']} test windows of {n} tokens; the model trained on {T}. Row norms of the table: "
        f"{report['row_norm_trained']:.3f} for the {T} trained rows, {report['row_norm_untrained']:.3f} for "
        f"rows {T}-{n - 1}, {report['row_norm_at_init']:.3f} expected at initialisation.",
        "",
        f"| table | loss within {T} | loss past {T} | degradation | within, minus trained | past, minus trained |",
        "|---|---|---|---|---|---|",
    ]
    for r in report["variants"]:
        lines.append(
            f"| {r['variant']} | {r['loss_within']:.3f} | {r['loss_past']:.3f} | {r['degradation']:+.3f} "
            f"| {_interval(r.get('within_minus_trained'))} | {_interval(r.get('past_minus_trained'))} |"
        )
    return "\n".join(lines) + "\n"
