"""Normalisation, sentence splitting and Brown detokenisation."""

from lmforge.data.text import detokenise, normalise, split_lines, split_sentences


def test_normalise_composes_unicode_and_collapses_whitespace():
    assert normalise("  cafe\u0301 \t au\n\u00a0lait  ") == "caf\u00e9 au lait"


def test_detokenise_attaches_punctuation_and_quotes():
    words = ["He", "said", "``", "no", "''", ",", "(", "twice", ")", "and", "left", "."]
    assert detokenise(words) == 'He said "no", (twice) and left.'


def test_detokenise_pairs_single_quotes_and_drops_double_full_stop():
    assert detokenise(["about", "'", "free", "'", "speech", "."]) == "about 'free' speech."
    assert detokenise(["Mr.", "Allen", "Jr.", "."]) == "Mr. Allen Jr."


def test_split_sentences_rejoins_wrapped_lines_and_splits_on_end_punctuation():
    text = 'First line\nwraps here. "Second!" Third?\n\nNew paragraph'
    assert split_sentences(text) == ["First line wraps here.", '"Second!"', "Third?", "New paragraph"]


def test_split_lines_keeps_non_empty_lines():
    assert split_lines("a  b\n\n c \n") == ["a b", "c"]
