"""Structured config of the `interpret` group, validated when the interpret stage starts."""

from __future__ import annotations

from dataclasses import dataclass, field

from lmforge.errors import ConfigError
from lmforge.structured import Group, rooted


@dataclass(frozen=True)
class InterpretConfig:
    name: str = "decoder"  # the DVC instance (interpret@<name>) and the report's title
    title: str = "the default decoder"  # what the report calls the model it looks into
    # the pretrain stage's folder of the decoder
    run_dir: str = rooted("artifacts/pretrain/decoder", "${paths.artifacts}/pretrain/decoder")
    final: str = "best"  # the checkpoint the maps and the lens read ({final}.ckpt)
    # the checkpoints kept along the way (train.keep_at), read in this order for the trajectories
    trajectory: list[str] = field(default_factory=lambda: ["step100", "step300", "step1000"])
    sentences: list[str] = field(
        default_factory=lambda: [
            "The jury said that the city had no evidence that the election was fair.",
            "She opened the door, and then she opened the window, and the room was cold.",
        ]
    )
    max_windows: int | None = None  # test windows (of the model's training length); null -> all
    batch_size: int = 32
    induction_sequences: int = 64  # random-token sequences, each repeated twice
    induction_length: int = 63  # tokens per copy; with the leading EOS, 2 * length + 1 <= max_seq_len
    # the second copy length of the shifted induction score (`shifted_induction_scores`)
    shift_length: int = 47
    # The ICL score: mean loss around late_position minus mean loss around early_position (each over
    # positions p - band .. p + band; one position of the test split is too noisy alone). Olsson et
    # al. 2022 read tokens 500 and 50 of 512-token contexts; 100 and 10 are that pair at 128.
    early_position: int = 10
    late_position: int = 100
    band: int = 5
    induction_threshold: float = 0.3  # a head whose induction score exceeds this is an induction head
    seed: int = 0  # draws the random-token sequences
    out_dir: str = rooted("reports/interpret/decoder", "${paths.reports}/interpret/decoder")

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ConfigError(f"interpret.name: got {self.name!r}, expected a non-empty name without '/'")
        if not self.trajectory:
            raise ConfigError("interpret.trajectory: got an empty list, expected checkpoint names")
        if not self.sentences:
            raise ConfigError("interpret.sentences: got an empty list, expected at least one sentence")
        if self.max_windows is not None and self.max_windows < 1:
            raise ConfigError(
                f"interpret.max_windows: got {self.max_windows}, expected null or an integer >= 1"
            )
        if self.shift_length == self.induction_length:
            raise ConfigError(
                f"interpret.shift_length: got {self.shift_length}, expected a length other than "
                f"induction_length ({self.induction_length})"
            )
        for name in ["batch_size", "induction_sequences", "induction_length", "shift_length"]:
            if getattr(self, name) < 1:
                raise ConfigError(f"interpret.{name}: got {getattr(self, name)}, expected an integer >= 1")
        if self.band < 0:
            raise ConfigError(f"interpret.band: got {self.band}, expected an integer >= 0")
        if not 0 <= self.early_position - self.band < self.early_position < self.late_position:
            raise ConfigError(
                f"interpret.early_position: got {self.early_position} and late_position {self.late_position}, "
                f"expected band ({self.band}) <= early_position < late_position"
            )
        if not 0.0 < self.induction_threshold < 1.0:
            raise ConfigError(
                f"interpret.induction_threshold: got {self.induction_threshold}, expected a value in (0, 1)"
            )


interpret_config = Group(InterpretConfig, "interpret")
