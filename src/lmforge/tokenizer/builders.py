"""Train the two tokenizers with HF `tokenizers` from an iterator of text.

A tokenizer is a pipeline normalizer -> pre-tokenizer -> model -> post-processor (+ decoder):

    WordPiece (BERT, Devlin et al., 2019): BertNormalizer (optional lowercase) -> BertPreTokenizer
        -> WordPiece("##", vocabulary learnt by reproducible BPE merges) -> TemplateProcessing "[CLS] A [SEP]" / "[CLS] A [SEP] B [SEP]"
        with type ids 0 / 1 -> WordPiece decoder.
    BPE (GPT-2, Radford et al., 2019): ByteLevel pre-tokenizer -> BPE over the 256-byte alphabet
        -> ByteLevel decoder; no unknown token, nothing added around an input but a leading space.

Both carry `n_sentinels` span-corruption sentinels <extra_id_i> as special tokens right after the
base specials, so the ids are fixed (see `lmforge.tokenizer.specials`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from lmforge.errors import ConfigError, DataError
from lmforge.tokenizer.config import Kind, TokenizerConfig
from lmforge.tokenizer.specials import BPE_SPECIALS, WORDPIECE_SPECIALS, special_tokens, text_only

BYTE_ALPHABET = 256
WORD_START = "\u2581"  # marks the first character of a word while learning WordPiece merges
WORDPIECE_ALPHABET = 1000  # most frequent characters kept (as HF's WordPieceTrainer does)
WORDPIECE_MARGIN = 1024  # extra BPE merges to learn, so the vocabulary fills up after deduplication


def minimum_vocab_size(cfg: TokenizerConfig) -> int:
    """Special tokens, plus the byte alphabet for BPE: a smaller vocab cannot hold them."""
    if cfg.kind is Kind.bpe:
        return len(BPE_SPECIALS) + cfg.n_sentinels + BYTE_ALPHABET
    return len(WORDPIECE_SPECIALS) + cfg.n_sentinels + 1


def check_vocab_size(cfg: TokenizerConfig) -> None:
    need = minimum_vocab_size(cfg)
    if cfg.vocab_size < need:
        what = "special tokens + 256 bytes" if cfg.kind is Kind.bpe else "special tokens + 1"
        raise ConfigError(
            f"tokenizer.vocab_size={cfg.vocab_size} is smaller than {need} ({what} with "
            f"n_sentinels={cfg.n_sentinels}); expected vocab_size >= {need}"
        )


def checked_utf8(batches: Iterable[list[str]]) -> Iterator[list[str]]:
    """Pass batches through, refusing text that cannot be encoded as UTF-8 (lone surrogates)."""
    for batch in batches:
        for text in batch:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as err:
                raise DataError(
                    f"training text contains {text[err.start]!r} at {err.start} of {text[:40]!r}, "
                    "which is not valid UTF-8; expected clean text from the prepare stage"
                ) from None
        yield batch


def build_wordpiece(cfg: TokenizerConfig, batches: Iterable[list[str]]) -> Tokenizer:
    specials = special_tokens(WORDPIECE_SPECIALS, cfg.n_sentinels)
    normalizer = normalizers.BertNormalizer(clean_text=True, lowercase=cfg.lowercase)
    vocab = _wordpiece_vocab(cfg, normalizer, batches, specials)
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", continuing_subword_prefix="##"))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens(specials)
    _check_layout(tok, specials)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return tok


def _wordpiece_vocab(
    cfg: TokenizerConfig,
    normalizer: normalizers.Normalizer,
    batches: Iterable[list[str]],
    specials: list[str],
) -> dict[str, int]:
    """A WordPiece vocabulary learnt by BPE merges over words marked at their start ("▁word").

    This is what `WordPieceTrainer` does internally, but it numbers the "##" pieces in hash-map
    order, which breaks ties between equally frequent merges differently on every run (different
    tokenizer.json, different encoded arrays on each `dvc repro`). Marking the word start instead
    keeps the trainer on its sorted-alphabet path, so the merges are reproducible. Then
    "▁piece" -> "piece" (word-initial) and "piece" -> "##piece" (continuation); every alphabet
    character is kept in both forms so that no known character becomes [UNK].
    """
    marker = pre_tokenizers.Metaspace(replacement=WORD_START, prepend_scheme="always", split=False)
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizer
    bpe.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.BertPreTokenizer(), marker])
    n_pieces = cfg.vocab_size - len(specials)
    trainer = trainers.BpeTrainer(
        vocab_size=n_pieces + WORDPIECE_MARGIN,  # margin for merged pieces that duplicate a character
        min_frequency=cfg.min_frequency,
        limit_alphabet=WORDPIECE_ALPHABET,
        show_progress=False,
    )
    bpe.train_from_iterator(checked_utf8(batches), trainer)
    by_id = sorted(bpe.get_vocab().items(), key=lambda kv: kv[1])  # alphabet (sorted), then merges
    alphabet = [t for t, _ in by_id if len(t) == 1 and t != WORD_START]
    merged = [t for t, _ in by_id if len(t) > 1]
    pieces = alphabet + [f"##{c}" for c in alphabet]
    pieces += [t[1:] if t.startswith(WORD_START) else f"##{t}" for t in merged]
    unique = [p for p in dict.fromkeys(pieces) if p not in specials][:n_pieces]
    return {token: i for i, token in enumerate(specials + unique)}


def build_bpe(cfg: TokenizerConfig, batches: Iterable[list[str]]) -> Tokenizer:
    specials = special_tokens(BPE_SPECIALS, cfg.n_sentinels)
    tok = Tokenizer(models.BPE())
    # Sentences are encoded one at a time and concatenated: a prefix space gives a sentence's first
    # word the same token it has mid-text (" He"), so packed text reads "man. He", not "man.He".
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=cfg.vocab_size,
        min_frequency=cfg.min_frequency,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(checked_utf8(batches), trainer)
    _check_layout(tok, specials)
    return tok


def _check_layout(tok: Tokenizer, specials: list[str]) -> None:
    for expected_id, token in enumerate(specials):
        if tok.token_to_id(token) != expected_id:
            raise DataError(
                f"trained tokenizer put {token} at id {tok.token_to_id(token)}; expected {expected_id}"
            )


BUILDERS = {Kind.wordpiece: build_wordpiece, Kind.bpe: build_bpe}


def train_tokenizer(cfg: TokenizerConfig, batches: Iterable[list[str]]) -> Tokenizer:
    """Check the vocab size, then train the configured kind on batches of sentences."""
    check_vocab_size(cfg)
    return text_only(BUILDERS[cfg.kind](cfg, batches))
