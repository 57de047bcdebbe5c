"""Teacher-forced encoder-decoder objectives: translation (Vaswani et al. 2017) and T5 span
corruption (Raffel et al. 2020).

The decoder reads `decoder_input_ids` (start token + targets shifted right, built by the collator)
and its logits at position t are scored against `labels[:, t]`; padding is -100. Both objectives
minimise this token cross entropy; span corruption also reports how well the dropped text alone is
restored, which plain source -> target pairs have no notion of.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor, nn

from lmforge.objectives.losses import (
    TokenLoss,
    check_label_smoothing,
    head_cross_entropy,
    token_cross_entropy,
)


class Seq2SeqObjective(nn.Module):
    """`objective(model, batch) -> (loss, stats)` for source -> target pairs (translation).

    Batch: `input_ids`, `attention_mask` `(B, T_enc)`; `decoder_input_ids`, `decoder_attention_mask`,
    `labels` `(B, T_dec)`. Stats (detached 0-dim): loss, accuracy, n_tokens, nll_sum, n_correct.
    """

    def __init__(self, label_smoothing: float = 0.0, loss_chunk: int | None = None) -> None:
        super().__init__()
        self.label_smoothing = check_label_smoothing(label_smoothing)
        self.loss_chunk = loss_chunk  # rows per fused head + loss chunk; None: the head's logits

    def token_loss(self, model: nn.Module, batch: Mapping[str, Tensor]) -> TokenLoss:
        labels = batch["labels"].reshape(-1)  # (B * T_dec,)
        source, source_mask = batch["input_ids"], batch.get("attention_mask")
        target, target_mask = batch["decoder_input_ids"], batch.get("decoder_attention_mask")
        if self.loss_chunk is None:
            logits = model(
                source,
                attention_mask=source_mask,
                decoder_input_ids=target,
                decoder_attention_mask=target_mask,
            ).logits  # (B, T_dec, V)
            return token_cross_entropy(logits.reshape(-1, logits.shape[-1]), labels, self.label_smoothing)
        hidden = model.features(source, source_mask, target, target_mask)  # (B, T_dec, D)
        hidden = hidden.reshape(-1, hidden.shape[-1])
        return head_cross_entropy(model.head, hidden, labels, self.label_smoothing, self.loss_chunk)

    def forward(self, model: nn.Module, batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        result = self.token_loss(model, batch)
        return result.loss, result.stats()


class SpanCorruptionObjective(Seq2SeqObjective):
    """The same loss for T5-style pretraining, with accuracy on the dropped text.

    With a `content_mask` `(B, T_dec)` in the batch the stats add n_content and n_content_correct:
    accuracy on the dropped text alone, without the sentinels and EOS that are easy to predict.
    """

    def forward(self, model: nn.Module, batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        result = self.token_loss(model, batch)
        stats = result.stats()
        if "content_mask" in batch:
            content, labels = batch["content_mask"], batch["labels"]  # (B, T_dec)
            stats["n_content"] = content.sum()
            predictions = result.predictions.view_as(labels)  # (B, T_dec)
            stats["n_content_correct"] = ((predictions == labels) & content).sum()
        return result.loss, stats
