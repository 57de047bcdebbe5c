"""Masked language modelling objective (Devlin et al. 2018), with optional next-sentence prediction.

The loss is computed on the selected positions only, with sparse prediction: the model receives
`predict_mask = labels != -100` and projects to the vocabulary only those rows, `(N, V)` in the
row-major order of `predict_mask.nonzero()` (as in cramming, Geiping & Goldstein 2022), instead of
all `(B, T, V)`. With `nsp=True` the NSP head reads `last_hidden_state` and the total loss is
MLM + NSP, as in BERT.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch.nn.functional as F
from torch import Tensor, nn

from lmforge.errors import ConfigError
from lmforge.objectives.losses import check_label_smoothing, head_cross_entropy, ratio, token_cross_entropy
from lmforge.objectives.masking import IGNORE_INDEX
from lmforge.objectives.nsp import NSPHead


class MaskedLMObjective(nn.Module):
    """`objective(model, batch) -> (loss, stats)` for BERT/RoBERTa pretraining.

    Batch: `input_ids`, `attention_mask`, `labels` `(B, T)`; `token_type_ids` optional;
    `nsp_labels` `(B,)` required when `nsp=True`.
    Stats (detached 0-dim): loss, mlm_loss, mlm_accuracy, n_masked, n_tokens (= n_masked),
    nll_sum, n_correct, and with NSP: nsp_loss, nsp_accuracy and the sums nsp_nll_sum, nsp_n,
    nsp_correct (so validation can average over a whole split).
    """

    def __init__(
        self,
        d_model: int,
        nsp: bool = False,
        label_smoothing: float = 0.0,
        loss_chunk: int | None = None,
    ) -> None:
        super().__init__()
        self.label_smoothing = check_label_smoothing(label_smoothing)
        self.loss_chunk = loss_chunk  # rows per fused head + loss chunk; None: the head's logits
        self.nsp_head = NSPHead(d_model) if nsp else None

    def forward(self, model: nn.Module, batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        labels = batch["labels"]  # (B, T)
        predict_mask = labels != IGNORE_INDEX  # (B, T)
        # Sentence pairs also work without segment embeddings (RoBERTa-style): [SEP] marks the break.
        segments = batch.get("token_type_ids") if model.config.n_segments else None
        targets = labels[predict_mask]  # (N,) sparse prediction: the N selected positions, row-major
        if self.loss_chunk is None:
            out = model(
                batch["input_ids"],
                attention_mask=batch.get("attention_mask"),
                token_type_ids=segments,
                predict_mask=predict_mask,
            )
            hidden = out.last_hidden_state  # (B, T, D)
            mlm = token_cross_entropy(out.logits, targets, self.label_smoothing)  # logits (N, V)
        else:  # the head fused with the loss: no (N, V) logits
            hidden = model.features(batch["input_ids"], batch.get("attention_mask"), segments)  # (B, T, D)
            mlm = head_cross_entropy(
                model.head, hidden[predict_mask], targets, self.label_smoothing, self.loss_chunk
            )
        loss = mlm.loss
        stats = {
            "mlm_loss": mlm.loss.detach(),
            "mlm_accuracy": ratio(mlm.n_correct, mlm.n_tokens),
            "n_masked": mlm.n_tokens,
            "n_tokens": mlm.n_tokens,
            "nll_sum": mlm.nll_sum,
            "n_correct": mlm.n_correct,
        }
        if self.nsp_head is not None:
            if "nsp_labels" not in batch:
                raise ConfigError(
                    "batch without 'nsp_labels': nsp=True expects sentence-pair items with nsp_label"
                )
            nsp_logits = self.nsp_head(hidden)  # (B, 2)
            nsp_labels = batch["nsp_labels"]  # (B,)
            nsp_loss = F.cross_entropy(nsp_logits, nsp_labels)
            loss = loss + nsp_loss
            correct = (nsp_logits.detach().argmax(-1) == nsp_labels).sum()
            stats["nsp_loss"] = nsp_loss.detach()
            stats["nsp_accuracy"] = ratio(correct, nsp_labels.new_tensor(len(nsp_labels)))
            stats["nsp_nll_sum"] = nsp_loss.detach().float() * len(nsp_labels)
            stats["nsp_n"] = nsp_labels.new_tensor(len(nsp_labels))
            stats["nsp_correct"] = correct
        stats["loss"] = loss.detach()
        return loss, stats
