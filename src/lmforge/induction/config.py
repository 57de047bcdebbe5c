"""Structured config of the `induction` group (pipelines/induction.py, pipelines/induction_summary.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lmforge.errors import ConfigError
from lmforge.structured import Group, rooted

TASKS = ("synthetic", "periodic", "copies")  # the random-token tasks (lmforge.induction.data's layouts)
DATA = ("text", *TASKS)  # what the study trains on (`InductionConfig.data`)


@dataclass(frozen=True)
class InductionConfig:
    name: str = "share0"  # the DVC instance (induction@<name>): the run's folder under runs_dir
    # the share of training windows in which a span of [min_span, max_span] tokens is copied to a later
    # place in the same window (0: natural text only); validation and the probes read unmodified text
    repeat_share: float = 0.0
    min_span: int = 8
    max_span: int = 32
    # what the model trains on: "text" (the corpus, `repeat_share` of its windows with a copied span),
    # "synthetic": random tokens (the first `synthetic_vocab` non-special ids; 0: all of them), every
    # window with a span of [min_span, max_span] copied to a later place, fresh from (seed, draw, window),
    # or "periodic": such tokens, a sequence of [min_span, max_span] of them repeated to the window's end
    # or "copies": such tokens in spans of [min_span, max_span], half of those after the first copies of
    # a stretch from anywhere earlier in the window (lmforge.induction.data)
    data: str = "text"
    synthetic_vocab: int = 0
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])  # one training run per seed
    probe_every: int = 50  # optimizer steps between probes (and at step 0 and the last step)
    induction_sequences: int = 64  # random-token sequences repeated twice (lmforge.interpret.induction)
    induction_length: int = 63  # tokens per copy; 2 * length + 1 <= the model's max_seq_len
    # a second copy length for the shifted induction score (lmforge.interpret.induction's
    # `shifted_induction_scores`: a head scores at a shift only as much as it does at both lengths)
    shift_length: int = 47
    icl_windows: int = 64  # validation windows for the in-context-learning score and the probe's loss
    early_position: int = 10  # the ICL score: loss around late_position minus loss around early_position
    late_position: int = 100
    band: int = 5
    induction_threshold: float = 0.3  # a head whose score exceeds this is an induction head
    # optimizer steps at which each seed's weights are kept, as {runs_dir}/{name}/seed<seed>/step<N>.ckpt,
    # with last.ckpt at the end, for reading the heads' attention maps (`lmforge.interpret`); empty: none
    keep_steps: list[int] = field(default_factory=list)
    runs_dir: str = rooted("reports/induction/runs", "${paths.reports}/induction/runs")
    out_dir: str = rooted("reports/induction", "${paths.reports}/induction")  # the summary's

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ConfigError(f"induction.name: got {self.name!r}, expected a non-empty name without '/'")
        if not 0.0 <= self.repeat_share <= 1.0:
            raise ConfigError(f"induction.repeat_share: got {self.repeat_share}, expected a share in [0, 1]")
        if not 1 <= self.min_span <= self.max_span:
            raise ConfigError(
                f"induction.min_span: got {self.min_span} and max_span {self.max_span}, "
                "expected 1 <= min_span <= max_span"
            )
        if self.data not in DATA:
            raise ConfigError(f"induction.data: got {self.data!r}, expected one of {', '.join(DATA)}")
        if self.synthetic_vocab < 0 or self.synthetic_vocab == 1:
            raise ConfigError(
                f"induction.synthetic_vocab: got {self.synthetic_vocab}, expected 0 (every token) or >= 2"
            )
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"induction.seeds: got {self.seeds}, expected distinct integers")
        if self.shift_length == self.induction_length:
            raise ConfigError(
                f"induction.shift_length: got {self.shift_length}, expected a length other than "
                f"induction_length ({self.induction_length})"
            )
        for key in ("probe_every", "induction_sequences", "induction_length", "shift_length", "icl_windows"):
            if getattr(self, key) < 1:
                raise ConfigError(f"induction.{key}: got {getattr(self, key)}, expected an integer >= 1")
        if not 0 <= self.early_position - self.band < self.early_position < self.late_position:
            raise ConfigError(
                f"induction.early_position: got {self.early_position} and late_position "
                f"{self.late_position}, expected band ({self.band}) <= early_position < late_position"
            )
        if any(step < 1 for step in self.keep_steps):
            raise ConfigError(f"induction.keep_steps: got {self.keep_steps}, expected optimizer steps >= 1")
        if not 0.0 < self.induction_threshold < 1.0:
            raise ConfigError(
                f"induction.induction_threshold: got {self.induction_threshold}, expected a value in (0, 1)"
            )


induction_config = Group(InductionConfig, "induction")
