"""BERT masked-language-model corruption: select 15% of tokens, then 80% [MASK] / 10% random / 10% kept.

Devlin et al. 2018, section 3.1 ("Task #1: Masked LM") and appendix A.1: each maskable token is
selected with probability p; a selected token is replaced by [MASK] 80% of the time, by a random
token 10% of the time and left unchanged 10% of the time, and the model predicts the original token
at every selected position (labels elsewhere are -100, the `ignore_index` of `F.cross_entropy`).
Special tokens ([CLS], [SEP], [PAD], ...) are never selected, and random replacements are drawn
only from the ordinary (non-special) vocabulary.

Whether the mask is static (BERT) or dynamic (RoBERTa) is decided by the generator passed in; see
`lmforge.objectives.rng.ExampleRNG`.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

from lmforge.errors import ConfigError

IGNORE_INDEX = -100  # label of positions that carry no loss (F.cross_entropy's default ignore_index)


def maskable_positions(input_ids: Tensor, special_ids: Tensor) -> Tensor:
    """True where a token may be selected for prediction: not a special token (padding included)."""
    return ~torch.isin(input_ids, special_ids)  # same shape as input_ids


def mask_tokens(
    input_ids: Tensor,
    maskable: Tensor,
    mask_id: int,
    replacement_ids: Tensor,
    generator: torch.Generator,
    mlm_probability: float = 0.15,
    mask_fraction: float = 0.8,
    random_fraction: float = 0.1,
) -> tuple[Tensor, Tensor]:
    """Apply 80/10/10 MLM corruption to `input_ids` (any shape); return `(corrupted_ids, labels)`.

    Three draws of the full shape, always in the same order, so the result depends only on the
    generator's state and the input's shape: selection, then the action of each selected token,
    then the random replacement token.
    """
    selected = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & maskable
    # action in [0, mask_fraction) -> [MASK]; in the next random_fraction band -> random token; else kept
    action = torch.rand(input_ids.shape, generator=generator)
    pick = torch.randint(len(replacement_ids), input_ids.shape, generator=generator)
    to_mask = selected & (action < mask_fraction)
    to_random = selected & (action >= mask_fraction) & (action < mask_fraction + random_fraction)

    corrupted = input_ids.clone()
    corrupted[to_mask] = mask_id
    corrupted[to_random] = replacement_ids[pick[to_random]]
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    return corrupted, labels


class MLMMasker:
    """MLM corruption with its vocabulary facts bound once: which ids are special, which may replace.

    Call it on one example's ids `(T,)` (or a batch `(B, T)`) with the generator that example should
    use. Picklable: it holds only ints, floats and small CPU tensors.
    """

    def __init__(
        self,
        mask_id: int,
        vocab_size: int,
        special_ids: Iterable[int],
        mlm_probability: float = 0.15,
        mask_fraction: float = 0.8,
        random_fraction: float = 0.1,
    ) -> None:
        specials = sorted({int(i) for i in special_ids if i is not None} | {int(mask_id)})
        if not 0.0 < mlm_probability < 1.0:
            raise ConfigError(f"mlm_probability={mlm_probability}: expected a probability in (0, 1)")
        if not (0.0 <= mask_fraction and 0.0 <= random_fraction and mask_fraction + random_fraction <= 1.0):
            raise ConfigError(
                f"mask_fraction={mask_fraction}, random_fraction={random_fraction}: "
                "expected non-negative fractions summing to at most 1"
            )
        if any(not 0 <= i < vocab_size for i in specials):
            raise ConfigError(f"special ids {specials}: expected every id in [0, vocab_size={vocab_size})")
        self.special_ids = torch.tensor(specials, dtype=torch.long)  # (S,)
        is_special = torch.zeros(vocab_size, dtype=torch.bool)
        is_special[self.special_ids] = True
        self.replacement_ids = torch.nonzero(~is_special).squeeze(1)  # (V - S,) ordinary tokens
        if len(self.replacement_ids) == 0:
            raise ConfigError(
                f"vocab_size={vocab_size}: expected ordinary tokens beyond the {len(specials)} special ids"
            )
        self.mask_id = int(mask_id)
        self.mlm_probability = float(mlm_probability)
        self.mask_fraction = float(mask_fraction)
        self.random_fraction = float(random_fraction)

    def __call__(self, input_ids: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """Return `(corrupted_ids, labels)`, both shaped like `input_ids`."""
        return mask_tokens(
            input_ids,
            maskable_positions(input_ids, self.special_ids),
            self.mask_id,
            self.replacement_ids,
            generator,
            self.mlm_probability,
            self.mask_fraction,
            self.random_fraction,
        )
