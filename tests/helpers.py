"""Small builders shared by tests (importable because pytest puts tests/ on the path)."""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

from lmforge.model.config import ModelConfig
from lmforge.stage import Plan, read
from scripts.dvc_yaml import sweep_jobs  # noqa: F401  (tests import it from here)


@dataclass(frozen=True, kw_only=True, eq=False)
class SeedPlan(Plan):
    """A test stage's plan: the top-level `seed` alone."""

    seed: int = read(int)


def tiny(**overrides) -> ModelConfig:
    """A model small enough that a test forward takes milliseconds."""
    values = dict(vocab_size=61, d_model=32, n_layers=2, n_heads=4, d_ff=64, max_seq_len=64)
    values.update(overrides)
    return ModelConfig(**values)


CONF = Path(__file__).resolve().parents[1] / "conf"

# The pretrain entry point on the smoke corpus of the `workspace` fixture, the decoder's family: what
# the end-to-end tests that run it as a subprocess start from.
SMOKE_DECODER = [
    "experiment=smoke",
    "data=local",
    "data.local.path=corpus",
    "model=gpt_tiny",
    "objective=clm",
    "tokenizer=bpe",
]


def group_yaml(path: Path) -> DictConfig:
    """One config group's preset as a composed config holds it: merged over the presets its defaults
    list names (`base` first, each group's dataclass defaults), beside conf/paths/default.yaml so its
    `${paths.data}`-style roots resolve when the group is validated."""
    root = OmegaConf.create({"paths": OmegaConf.load(CONF / "paths" / "default.yaml"), "group": preset(path)})
    return root.group


def preset_parents(path: Path) -> list[str]:
    """The presets a group yaml's defaults list builds on (`base`, or a preset that does)."""
    return [d for d in OmegaConf.load(path).get("defaults", []) if d != "_self_"]


def preset(path: Path, own: bool = True) -> DictConfig:
    """A group preset merged over the presets its defaults list names, interpolations unresolved;
    `own=False`: only what it inherits."""
    node = OmegaConf.load(path)
    node.pop("defaults", None)
    inherited = [preset(path.parent / f"{d}.yaml") for d in preset_parents(path)]
    return OmegaConf.merge(*inherited, node if own else {})


SUBJECTS = ["the jury", "a farmer", "the old mayor", "my sister", "the committee", "a young doctor"]
VERBS = ["said", "found", "wanted", "believed", "reported", "noticed"]
OBJECTS = ["the evidence", "a new road", "the letter", "an answer", "the river", "some bread"]


def write_corpus(folder: Path, n_documents: int = 60, seed: int = 0) -> None:
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    for d in range(n_documents):
        sentences = [
            f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.choice(OBJECTS)} in {1900 + d}."
            for _ in range(rng.randint(12, 20))
        ]
        (folder / f"doc{d:03d}.txt").write_text(" ".join(sentences) + "\n")


def stage_config(*overrides: str):
    """The real composed config with the smoke overlay, the local corpus and no tracking."""
    base = [
        "experiment=smoke",
        "logger=none",
        "data=local",
        "data.local.path=corpus",
        "data.sentence_split=regex",
    ]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=[*base, *overrides])


WORDPIECE_VOCAB = (
    "[PAD] [UNK] [CLS] [SEP] [MASK] the un ##hap ##pily runs where does tower stand paris is in ? . old"
)


def tiny_wordpiece() -> Tokenizer:
    """A BERT-style WordPiece tokenizer over a 20-token vocabulary: [CLS] A [SEP] B [SEP], offsets."""
    vocab = {token: i for i, token in enumerate(WORDPIECE_VOCAB.split())}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.BertProcessing(("[SEP]", vocab["[SEP]"]), ("[CLS]", vocab["[CLS]"]))
    return tok


class Interrupt(L.Callback):
    """Counts the steps this session trains; dies like `kill -9` would at `at_step` (no hook of ours
    runs after it)."""

    def __init__(self, at_step: int | None) -> None:
        self.at_step, self.first_step, self.batches = at_step, None, 0

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        if trainer.global_step == self.at_step:
            raise SystemExit(137)
        if self.first_step is None:
            self.first_step = trainer.global_step
        self.batches += 1


def run_with_interruptions(monkeypatch, run, cfg, stops, total_steps: int):
    """`run(cfg)` once per (at_step, starts_at) in `stops`: each session dies at `at_step` (None: runs
    to the end) and must start at `starts_at`, where the previous one's last checkpoint was, and
    train the steps up to its end. Returns the finishing session's result."""
    original = L.Trainer.__init__
    result = None
    for at_step, starts_at in stops:
        spy = Interrupt(at_step)

        def dying(self, *args, callbacks=(), spy=spy, **kwargs):
            original(self, *args, callbacks=[*callbacks, spy], **kwargs)

        monkeypatch.setattr(L.Trainer, "__init__", dying)
        try:
            if at_step is None:
                result = run(cfg)
            else:
                try:
                    run(cfg)
                except SystemExit:
                    pass
                else:
                    raise AssertionError(f"the run did not die at step {at_step}")
        finally:
            monkeypatch.setattr(L.Trainer, "__init__", original)
        assert spy.first_step == starts_at and spy.batches == (at_step or total_steps) - starts_at
    return result


# The scaling tests: the scaling primary config on the shared tiny workspace (its local corpus encoded
# with a 600-token BPE), a grid of 2 tiny shapes x 3 budgets, no tracking unless a test adds it.
SCALING_TINY = [
    "experiment=smoke",
    "logger=none",
    "data=local",
    "data.local.path=corpus",
    "tokenizer=bpe",
    "tokenizer.vocab_size=600",
    "scaling.sizes=[1,2]",
    "scaling.tokens=[512,1024,2048]",
    "scaling.isoflop=[]",
    "scaling.repeats.cells=[]",
    "scaling.repeats.seeds=[]",
    "optim.warmup_steps=1",
    "scaling.batch_size=4",
    "scaling.seq_len=32",
    "scaling.eval_tokens=1024",
    "scaling.checkpoint_every=2",
    "scaling.store=store",
    "scaling.name=tiny",
]


def scaling_config(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="scaling", overrides=[*SCALING_TINY, *overrides])


def tree(*folders: str | Path) -> dict[str, str]:
    """sha256 of every file under `folders` by path (lock files aside: empty flock targets, not
    outputs): equal before and after means a run wrote, moved and deleted nothing there."""
    import hashlib

    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for folder in folders
        for p in sorted(Path(folder).rglob("*"))
        if p.is_file() and p.suffix != ".lock"
    }


@functools.cache
def entry_stage(script: str):
    """The `STAGE` of pipelines/<script>.py, from the stage registry. Tests run a stage as
    `entry_stage(name)(cfg)`: through the door that validates `cfg` into the stage's plan."""
    import pipelines

    return pipelines.stage(script)


def fails_in_one_line(capsys, stage, cfg) -> str:
    """Run `stage` on `cfg` through `execute`: it must exit 2 with one `error: ` line on stderr."""
    from lmforge.door import execute

    with pytest.raises(SystemExit) as exit_info:
        execute(stage, cfg)
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and err.startswith("error: ") and "\n" not in err, err
    return err


def student_of(teacher, teacher_config: ModelConfig, cfg):
    """A student as the distill stage makes one: `student_config`'s architecture, then, unless
    init=random, the teacher's weights copied by `init_student` along the layer map."""
    from lmforge.distill.config import StudentInit, layer_map_for
    from lmforge.distill.student import init_student, student_config
    from lmforge.model import build_model

    student = build_model(student_config(teacher_config, cfg))
    if cfg.init is StudentInit.teacher:
        init_student(student, teacher, layer_map_for(cfg, teacher_config.n_layers))
    return student


def entry_point(script: str, *args: str, cwd: Path, env: dict | None = None):
    """`python pipelines/<script> args...` in `cwd`, as DVC runs it; the CompletedProcess."""
    import os
    import subprocess
    import sys

    command = [sys.executable, str(CONF.parent / "pipelines" / script), *args]
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def mlflow_runs(uri: str):
    """The runs of the `lmforge` experiment in the store at `uri`, as a DataFrame."""
    import mlflow

    mlflow.set_tracking_uri(uri)
    return mlflow.search_runs(experiment_names=["lmforge"])


def val_loss(run) -> float:
    """A pretraining run's validation loss, named by what it measures (`val/mlm_loss`, `val/clm_loss`)."""
    (name,) = [k for k in run.index if k in ("metrics.val/mlm_loss", "metrics.val/clm_loss")]
    return run[name]
