"""Tokenizers: WordPiece (BERT) and byte-level BPE (GPT-2), trained with HF `tokenizers`.

`load_tokenizer(path)` reads a saved `tokenizer.json`; `special_token_ids(tokenizer)` returns the
frozen `SpecialTokens` (pad, unk, cls, sep, mask, eos, bos, sentinels) that models and collators use.
"""

from lmforge.tokenizer.specials import SpecialTokens, load_tokenizer, special_token_ids

__all__ = ["SpecialTokens", "load_tokenizer", "special_token_ids"]
