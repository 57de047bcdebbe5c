"""The `export` stage: one pretrained model of ours as a Hugging Face folder, checked against the
reference implementation.

Reads {models_dir}/{run}/{checkpoint}.ckpt (`weights_only=True`), the tokenizer it was trained
with and that tokenizer's encoded test split, and for the model card the evaluate stage's
{eval_dir}/{run}.json and the data card. Writes {out_dir}/{run}/ (config.json, model.safetensors,
tokenizer.json, tokenizer_config.json, README.md: the model card, `lmforge.export.card`) and
{reports_dir}/{run}.json. The check loads the folder with
`transformers` (`AutoModelFor...`, `AutoTokenizer`; peft brings it along) and compares, on windows
of the test split: the logits (largest absolute difference, which must stay within
`export.tolerance`), greedy continuations of the first tokens of each window (decoders and
encoder-decoders; identical or not), and the tokenizer's ids; where our importer reads the
architecture back (`lmforge.hf.load_pretrained`), the re-imported model's logits too.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import torch
from torch import nn

from lmforge.data.datasets import PackedDataset
from lmforge.data.encoded import EncodedSplit
from lmforge.errors import DataError
from lmforge.export.card import card_for
from lmforge.export.config import ExportConfig, export_config
from lmforge.export.hf import export_pretrained, exporter_for
from lmforge.hf.architectures import ARCHITECTURES
from lmforge.hf.load import load_pretrained
from lmforge.io import write_json
from lmforge.model.config import Family
from lmforge.model.generation import generate
from lmforge.stage import Plan, StageResult, read
from lmforge.tokenizer.config import TokenizerConfig, tokenizer_config
from lmforge.tokenizer.specials import load_tokenizer, special_token_ids
from lmforge.training.checkpoints import load_module
from lmforge.training.pretrain import tokenizer_paths

AUTO_CLASSES = {  # which transformers auto class loads each family's export
    Family.encoder: "AutoModelForMaskedLM",
    Family.decoder: "AutoModelForCausalLM",
    Family.encoder_decoder: "AutoModelForSeq2SeqLM",
}


def windows(encoded_dir: Path, length: int, eos: int, count: int) -> torch.Tensor:
    """The first `count` windows of the test split, packed as in pretraining."""
    data = PackedDataset(EncodedSplit(encoded_dir, "test"), length, eos_id=eos)
    if len(data) == 0:
        raise DataError(
            f"{encoded_dir}: the test split has no window of {length} tokens; expected a longer split"
        )
    return torch.stack([data[i]["input_ids"] for i in range(min(count, len(data)))])


@torch.no_grad()
def logits(model: nn.Module, ids: torch.Tensor, family: Family, hf: bool) -> torch.Tensor:
    """Logits on `ids`; an encoder-decoder reads the first half and is fed the second (shifted)."""
    if family is Family.encoder_decoder:
        half = ids.shape[1] // 2
        source, target = ids[:, :half], ids[:, half:]
        if hf:
            return model(input_ids=source, decoder_input_ids=target).logits
        return model(source, None, target).logits
    return model(input_ids=ids).logits if hf else model(ids).logits


@torch.no_grad()
def continuations(model: nn.Module, prompts: torch.Tensor, family: Family, new: int, eos: int, pad: int,
                  hf: bool) -> torch.Tensor:  # fmt: skip
    """Greedy continuations (the prompt or start token included), stopping at `eos`."""
    if hf:
        kwargs = dict(do_sample=False, max_new_tokens=new, eos_token_id=eos, pad_token_id=pad)
        if family is Family.encoder_decoder:
            kwargs["decoder_start_token_id"] = pad
        return model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), **kwargs)
    start = pad if family is Family.encoder_decoder else None
    return generate(model, prompts, max_new_tokens=new, temperature=0, eos_token_id=eos, pad_token_id=pad,
                    decoder_start_token_id=start)  # fmt: skip


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class ExportPlan(Plan):
    """The `export` stage's plan."""

    export: ExportConfig = read(export_config)
    tokenizer: TokenizerConfig = read(tokenizer_config)


def run(plan: ExportPlan) -> StageResult:
    cfg = plan.export
    checkpoint = Path(cfg.models_dir) / cfg.run / f"{cfg.checkpoint}.ckpt"
    tokenizer_file, encoded_dir = tokenizer_paths(plan.tokenizer)
    tokenizer = load_tokenizer(tokenizer_file)
    specials = special_token_ids(tokenizer)
    model = load_module(checkpoint).model.float().eval()
    config = model.config
    if config.vocab_size != tokenizer.get_vocab_size():
        raise DataError(
            f"{checkpoint}: a vocabulary of {config.vocab_size}, but tokenizer {tokenizer_file} has "
            f"{tokenizer.get_vocab_size()}; expected tokenizer={plan.tokenizer.name} to be the one it was trained with"
        )
    folder = Path(cfg.out_dir) / cfg.run
    found = exporter_for(config)
    card = card_for(cfg.run, config.family, found.architecture, found.model_type,
                    sum(p.numel() for p in model.parameters()), AUTO_CLASSES[config.family],
                    Path(cfg.eval_dir) / f"{cfg.run}.json", Path(cfg.data_card))  # fmt: skip
    exporter = export_pretrained(model, folder, tokenizer_file, card)

    ids = windows(encoded_dir, min(cfg.length, config.max_seq_len), specials.eos, cfg.windows)
    ours = logits(model, ids, config.family, hf=False)
    reference = _reference(folder, config.family)
    hf_diff = (logits(reference, ids, config.family, hf=True) - ours).abs().max().item()
    if not hf_diff <= cfg.tolerance:
        raise DataError(
            f"export of {cfg.run}: transformers' {exporter.architecture} gives logits up to {hf_diff:.3g} away "
            f"from ours; expected at most export.tolerance={cfg.tolerance}"
        )
    roundtrip = None
    if exporter.model_type in ARCHITECTURES:  # our importer reads this architecture back
        back = load_pretrained(folder).model
        roundtrip = (logits(back, ids, config.family, hf=False) - ours).abs().max().item()

    report = {
        "run": cfg.run,
        "checkpoint": str(checkpoint),
        "folder": str(folder),
        "model_type": exporter.model_type,
        "architecture": exporter.architecture,
        "parameters": sum(p.numel() for p in model.parameters()),
        "bytes": folder_bytes(folder),
        "files": sorted(p.name for p in folder.iterdir()),
        "windows": int(ids.shape[0]),
        "window_tokens": int(ids.shape[1]),
        "max_abs_logit_diff": hf_diff,
        "roundtrip_max_abs_logit_diff": roundtrip,
        "tokenizer_ids_identical": _tokenizer_agrees(folder, tokenizer, ids),
    }
    if config.family is not Family.encoder:
        prompts = ids[: cfg.prompts, : cfg.prompt_length]
        args = (config.family, cfg.new_tokens, specials.eos, config.pad_token_id)
        theirs = continuations(reference, prompts, *args, hf=True)
        mine = continuations(model, prompts, *args, hf=False)
        same = [
            bool(a.shape == b.shape and torch.equal(a, b))
            for a, b in zip(_trim(theirs, config.pad_token_id), _trim(mine, config.pad_token_id))
        ]
        report.update(greedy_prompts=len(same), greedy_identical=sum(same))
    out = Path(cfg.reports_dir) / f"{cfg.run}.json"
    write_json(out, report)
    metrics = {
        f"export/{key}": float(value)
        for key, value in report.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }
    metrics["export/tokenizer_ids_identical"] = float(report["tokenizer_ids_identical"])
    return StageResult(metrics, [str(out), str(folder / "config.json")])


def _reference(folder: Path, family: Family) -> nn.Module:
    """The exported folder as transformers loads it, every tensor in place (none missing or unused)."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import transformers

    transformers.utils.logging.disable_progress_bar()
    auto = getattr(transformers, AUTO_CLASSES[family])
    model, info = auto.from_pretrained(folder, output_loading_info=True)
    problems = {key: value for key, value in info.items() if value}
    if problems:
        kind, names = next(iter(problems.items()))
        raise DataError(f"export {folder}: transformers reports {kind} {sorted(names)[:3]}; expected none")
    return model.eval()


def _tokenizer_agrees(folder: Path, tokenizer, ids: torch.Tensor) -> bool:
    """AutoTokenizer on the folder gives our tokenizer's ids for the decoded test windows."""
    from transformers import AutoTokenizer

    theirs = AutoTokenizer.from_pretrained(folder)
    texts = tokenizer.decode_batch(ids.tolist())
    return all(
        theirs(text, add_special_tokens=False)["input_ids"]
        == tokenizer.encode(text, add_special_tokens=False).ids
        for text in texts
    )


def _trim(rows: torch.Tensor, pad: int) -> list[torch.Tensor]:
    """Each row without the padding after its end (HF pads a finished batch; we stop with it)."""
    out = []
    for row in rows:
        keep = len(row)
        while keep > 1 and row[keep - 1] == pad:
            keep -= 1
        out.append(row[:keep])
    return out
