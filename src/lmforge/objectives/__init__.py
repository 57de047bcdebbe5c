"""Training objectives (MLM + NSP, causal LM, T5 span corruption, sequence-to-sequence), their
corruption and collators.

An objective is a small `nn.Module` called as `objective(model, batch) -> (loss, stats)`; heads with
parameters (the NSP pooler) live in it so they are registered, optimised and checkpointed.
"""

from lmforge.objectives.clm import CausalLMObjective
from lmforge.objectives.collate import CausalLMCollator, MLMCollator, SpanCorruptionCollator
from lmforge.objectives.masking import IGNORE_INDEX, MLMMasker, mask_tokens
from lmforge.objectives.mlm import MaskedLMObjective
from lmforge.objectives.nsp import NSPHead
from lmforge.objectives.rng import ExampleRNG
from lmforge.objectives.seq2seq import Seq2SeqObjective, SpanCorruptionObjective
from lmforge.objectives.span_corruption import (
    SpanCorruptor,
    corrupt_spans,
    noise_span_counts,
    random_spans_noise_mask,
    restore_spans,
)

__all__ = [
    "IGNORE_INDEX",
    "CausalLMCollator",
    "CausalLMObjective",
    "ExampleRNG",
    "MLMCollator",
    "MLMMasker",
    "MaskedLMObjective",
    "NSPHead",
    "Seq2SeqObjective",
    "SpanCorruptionCollator",
    "SpanCorruptionObjective",
    "SpanCorruptor",
    "corrupt_spans",
    "mask_tokens",
    "noise_span_counts",
    "random_spans_noise_mask",
    "restore_spans",
]
