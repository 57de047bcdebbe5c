"""The `evaluate` stage: test metrics of a pretrained checkpoint beside a unigram baseline.

- decoder: test perplexity, next-token accuracy; samples decoded with the KV cache.
- encoder: MLM loss, perplexity and accuracy on the selected tokens (fixed masks); NSP loss and accuracy.
- encoder-decoder: span-corruption loss and accuracy on all target tokens (fixed spans), and
  `content_accuracy` on the dropped text alone (sentinels and EOS, ~30% of targets, are easy).
The test split is scored on at most `train.eval_windows` examples, evenly spaced (`test_n_tokens` says
how many tokens); the unigram baseline counts the targets (draw 0) of at most `eval.baseline_windows`
training examples, evenly spaced: all of them for Brown, a fixed sample of a large corpus.
The checkpoint is read with `weights_only=True` (`lmforge.training.checkpoints`).
Writes {eval.reports_dir}/{run_name}.json (for `dvc metrics show`) and, in {eval.reports_dir}/{run_name}/,
the decoder's samples.json and a loss-curve loss.png.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import torch

from lmforge.errors import DataError
from lmforge.evaluation.baseline import UnigramBaseline
from lmforge.evaluation.config import EvalConfig, SamplesConfig, eval_config
from lmforge.evaluation.plots import loss_curves
from lmforge.io import write_json
from lmforge.model import generate
from lmforge.objectives.collate import pad
from lmforge.objectives.summary import SplitSums, summarise
from lmforge.stage import Plan, StageResult, read, run_name_value, seed_value
from lmforge.tokenizer.config import TokenizerConfig, tokenizer_config
from lmforge.tokenizer.specials import load_tokenizer, special_token_ids
from lmforge.training.checkpoints import load_module
from lmforge.training.config import ObjectiveConfig, TrainConfig, objective_config, train_config
from lmforge.training.datamodule import PretrainDataModule
from lmforge.training.module import PretrainModule
from lmforge.training.pretrain import tokenizer_paths


@torch.no_grad()
def test_metrics(module: PretrainModule, batches) -> dict[str, float]:
    """The objective's split metrics (`summarise`) over `batches`, the same sums validation uses."""
    sums = SplitSums()
    for batch in batches:
        sums.update(module(batch)[1])
    totals = sums.as_dict()
    if totals["n_tokens"] == 0:
        raise DataError("the test split yielded no target tokens; expected a non-empty test split")
    return summarise(totals)


def samples(module: PretrainModule, tokenizer, specials, settings: SamplesConfig) -> list[dict[str, str]]:
    """Continuations of fixed prompts, one batch, decoded with the KV cache."""
    prompts = list(settings.prompts)
    encoded = [tokenizer.encode(p, add_special_tokens=False).ids for p in prompts]
    ids, mask = pad(encoded, specials.pad, left=True)  # every prompt ends at the last column
    width = ids.shape[1]
    out = []
    for name, temperature in (("greedy", 0.0), ("sampled", settings.temperature)):
        generated = generate(
            module.model,
            ids,
            attention_mask=mask,
            max_new_tokens=settings.max_new_tokens,
            temperature=temperature,
            top_k=settings.top_k,
            top_p=settings.top_p,
            eos_token_id=specials.eos,
            pad_token_id=specials.pad,
            generator=torch.Generator().manual_seed(settings.seed),
        )
        for prompt, row in zip(prompts, generated[:, width:].tolist()):
            text = tokenizer.decode([t for t in row if t != specials.pad], skip_special_tokens=True)
            out.append({"decoding": name, "prompt": prompt, "continuation": text})
    return out


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class EvaluatePlan(Plan):
    """The `evaluate` stage's plan."""

    tokenizer: TokenizerConfig = read(tokenizer_config)
    objective: ObjectiveConfig = read(objective_config)
    train: TrainConfig = read(train_config)
    eval: EvalConfig = read(eval_config)
    seed: int = read(seed_value)
    run_name: str = read(run_name_value)


def run(plan: EvaluatePlan) -> StageResult:
    train, objective, settings = plan.train, plan.objective, plan.eval
    module = load_module(Path(train.out_dir) / "best.ckpt")
    tokenizer_file, encoded_dir = tokenizer_paths(plan.tokenizer)
    tokenizer = load_tokenizer(tokenizer_file)
    specials = special_token_ids(tokenizer)
    data = PretrainDataModule(
        str(encoded_dir), objective, train, specials, module.model_config.vocab_size, seed=plan.seed
    )
    limit = settings.max_batches
    test = list(itertools.islice(data.test_dataloader(), limit))
    model_scores = test_metrics(module, test)
    baseline = UnigramBaseline(module.model_config.vocab_size)
    baseline.fit(data.loader("train", windows=settings.baseline_windows), data.spec.targets)
    base_scores = baseline.score(test, data.spec.targets)

    name = plan.run_name
    reports = Path(settings.reports_dir)
    metrics = {f"test_{k}": v for k, v in model_scores.items()}
    metrics.update({f"unigram_{k}": v for k, v in base_scores.items() if k != "n_tokens"})
    metrics["loss_ratio_to_unigram"] = model_scores["loss"] / base_scores["loss"]
    if "nsp_accuracy" in model_scores:
        metrics["nsp_chance_accuracy"] = 0.5  # IsNext and NotNext pairs are drawn 50/50
    write_json(reports / f"{name}.json", metrics)
    artifacts = [str(reports / f"{name}.json")]

    if data.spec.generates:
        write_json(reports / name / "samples.json", samples(module, tokenizer, specials, settings.samples))
        artifacts.append(str(reports / name / "samples.json"))
    curves = Path(train.reports_dir)
    plot = loss_curves(
        curves / "train_loss.csv",
        curves / "val_loss.csv",
        reports / name / "loss.png",
        title=f"{name}: {objective.name}",
        baseline=base_scores["loss"],
    )
    artifacts.append(str(plot))
    return StageResult(metrics, artifacts)
