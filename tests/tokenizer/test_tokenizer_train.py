"""WordPiece and byte-level BPE: special-token layout, post-processing, round trips, stage outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from helpers import entry_stage, group_yaml
from lmforge.data.documents import Document, iter_sentences, read_split, split_files, write_prepared
from lmforge.errors import ConfigError, DataError
from lmforge.tokenizer import SpecialTokens, load_tokenizer, special_token_ids
from lmforge.tokenizer.builders import train_tokenizer
from lmforge.tokenizer.config import tokenizer_config
from lmforge.tokenizer.stats import tokenizer_stats
from lmforge.tokenizer.train import every_kth, sample_stride


def test_wordpiece_layout_post_processor_and_round_trip(tokenizer_cfg):
    result = entry_stage("train_tokenizer")(tokenizer_cfg)
    tok = load_tokenizer(Path(tokenizer_cfg.tokenizer.dir) / "wp")
    assert [tok.id_to_token(i) for i in range(5)] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert special_token_ids(tok) == SpecialTokens(
        pad=0, unk=1, cls=2, sep=3, mask=4, eos=3, bos=2, sentinels=(5, 6, 7, 8)
    )
    single = tok.encode("The quick fox.")
    assert single.ids[0] == 2 and single.ids[-1] == 3 and set(single.type_ids) == {0}
    pair = tok.encode("The quick fox.", "A lazy dog!")
    first_sep = pair.ids.index(3)
    assert pair.tokens[0] == "[CLS]" and pair.tokens[-1] == "[SEP]" and pair.ids.count(3) == 2
    assert pair.type_ids == [0] * (first_sep + 1) + [1] * (len(pair.ids) - first_sep - 1)
    text = "the runner jumped happily, indeed."
    assert tok.decode(tok.encode(text).ids) == text  # specials skipped, ## pieces re-joined
    assert any(t.startswith("##") for t in tok.get_vocab())
    assert tok.encode("Café NAÏVE").tokens[1:-1] == ["cafe", "naive"]  # lowercase + accents stripped
    assert result.metrics["tokenizer/vocab_size"] <= 200


def test_wordpiece_can_keep_case(tokenizer_cfg):
    tokenizer_cfg.tokenizer.lowercase = False
    entry_stage("train_tokenizer")(tokenizer_cfg)
    tok = load_tokenizer(Path(tokenizer_cfg.tokenizer.dir) / "wp" / "tokenizer.json")
    assert "The" in tok.decode(tok.encode("The fox").ids)


def test_bpe_has_endoftext_sentinels_and_round_trips_bytes(bpe_cfg):
    entry_stage("train_tokenizer")(bpe_cfg)
    tok = load_tokenizer(Path(bpe_cfg.tokenizer.dir) / "bpe")
    ids = special_token_ids(tok)
    assert ids == SpecialTokens(
        pad=0, unk=None, cls=None, sep=None, mask=None, eos=1, bos=1, sentinels=(2, 3, 4, 5)
    )
    assert tok.id_to_token(1) == "<|endoftext|>" and tok.id_to_token(5) == "<extra_id_3>"
    text = "Unseen wörds ✓ and  double  spaces\n"
    enc = tok.encode(text)
    # Byte-exact round trip, but for the prefix space every input gets; no special token added.
    assert tok.decode(enc.ids) == " " + text and 1 not in enc.ids
    # Sentences encoded one by one and concatenated read as running text.
    pieces = tok.encode("It rained.").ids + tok.encode("He left.").ids
    assert tok.decode(pieces) == " It rained. He left."
    assert 4 not in tok.encode("a <extra_id_2> b").ids  # a sentinel string in text stays text
    assert tok.get_vocab_size() == 300


def test_report_on_val_split(tokenizer_cfg):
    result = entry_stage("train_tokenizer")(tokenizer_cfg)
    report = json.loads((Path(tokenizer_cfg.tokenizer.reports_dir) / "wp.json").read_text())
    val = list(iter_sentences(tokenizer_cfg.data.prepared_dir, "val"))
    tok = load_tokenizer(Path(tokenizer_cfg.tokenizer.dir) / "wp")
    n_tokens = sum(len(tok.encode(s, add_special_tokens=False).ids) for s in val)
    assert report["tokens"] == n_tokens
    assert report["tokens_per_word"] == pytest.approx(n_tokens / sum(len(s.split()) for s in val))
    assert report["bytes_per_token"] == pytest.approx(sum(len(s.encode()) for s in val) / n_tokens)
    assert report["unk_rate"] == 0.0 and report["vocab_size"] == tok.get_vocab_size()
    assert (report["sample_sentences"], report["sample_complete"]) == (len(val), 1)  # the whole split
    assert report["sample_bytes"] == sum(len(s.encode()) for s in val)
    assert sorted(result.artifacts) == sorted(
        [
            str(Path(tokenizer_cfg.tokenizer.dir) / "wp" / "tokenizer.json"),
            str(Path(tokenizer_cfg.tokenizer.reports_dir) / "wp.json"),
        ]
    )


@pytest.mark.parametrize(("kind", "vocab_size", "need"), [("wordpiece", 9, 10), ("bpe", 261, 262)])
def test_vocab_smaller_than_specials_is_a_config_error(tokenizer_cfg, kind, vocab_size, need):
    tokenizer_cfg.tokenizer.update({"kind": kind, "vocab_size": vocab_size})
    with pytest.raises(ConfigError, match=f"vocab_size={vocab_size} is smaller than {need}"):
        entry_stage("train_tokenizer")(tokenizer_cfg)


def test_invalid_utf8_in_prepared_split_is_a_data_error(tokenizer_cfg):
    train = Path(tokenizer_cfg.data.prepared_dir) / "train-00000.jsonl"
    train.write_bytes(train.read_bytes() + b'{"id": "x", "source": "t", "sentences": ["caf\xe9"]}\n')
    with pytest.raises(DataError, match=r"train-00000.jsonl:31 is not valid UTF-8"):
        entry_stage("train_tokenizer")(tokenizer_cfg)
    assert not (Path(tokenizer_cfg.tokenizer.dir) / "wp" / "tokenizer.json").exists()


def test_lone_surrogate_is_a_data_error():
    cfg = tokenizer_config(OmegaConf.create({"vocab_size": 50, "n_sentinels": 0}))
    with pytest.raises(DataError, match="not valid UTF-8"):
        train_tokenizer(cfg, [["fine text", "bad \ud800 text"]])


def test_empty_train_split_is_a_data_error(tokenizer_cfg):
    prepared = tokenizer_cfg.data.prepared_dir
    write_prepared(
        prepared, {split: list(read_split(prepared, split)) for split in ("val", "test")}
    )  # no train
    with pytest.raises(DataError, match="has no sentences"):
        entry_stage("train_tokenizer")(tokenizer_cfg)


def test_missing_tokenizer_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="run the tokenizer stage first"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(DataError, match="is not a valid tokenizer.json"):
        load_tokenizer(tmp_path)


@pytest.mark.parametrize(
    ("key", "value"), [("kind", "unigram"), ("vocab_size", 0), ("n_sentinels", -1), ("train_mb", -1)]
)
def test_bad_tokenizer_config_is_a_one_line_config_error(key, value):
    with pytest.raises(ConfigError) as info:
        tokenizer_config(OmegaConf.create({key: value}))
    assert "\n" not in str(info.value) and key in str(info.value)


def test_shipped_tokenizer_configs_validate():
    conf = Path(__file__).resolve().parents[2] / "conf" / "tokenizer"
    for name in ("wordpiece", "bpe"):
        cfg = tokenizer_config(group_yaml(conf / f"{name}.yaml"))
        assert cfg.name == name and cfg.kind.value == name and cfg.n_sentinels == 100


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_training_is_reproducible(tokenizer_cfg, kind):
    tokenizer_cfg.tokenizer.update({"kind": kind, "vocab_size": 300})
    saved = Path(tokenizer_cfg.tokenizer.dir) / "wp" / "tokenizer.json"
    entry_stage("train_tokenizer")(tokenizer_cfg)
    first = saved.read_bytes()
    entry_stage("train_tokenizer")(tokenizer_cfg)
    assert saved.read_bytes() == first  # same ids every run, so `dvc repro` and encoded arrays are stable


def test_stats_read_a_bounded_sample_of_whole_sentences(tokenizer_cfg):
    """Past `sample_bytes` the statistics stop reading: the numbers are those of the sentences read,
    and the report says the sample was not the whole split."""
    entry_stage("train_tokenizer")(tokenizer_cfg)
    tok = load_tokenizer(Path(tokenizer_cfg.tokenizer.dir) / "wp")
    val = list(iter_sentences(tokenizer_cfg.data.prepared_dir, "train"))
    limit = sum(len(s.encode()) for s in val) // 3
    part = tokenizer_stats(tok, iter(val), sample_bytes=limit)
    n = part["sample_sentences"]
    read = val[:n]
    assert 0 < n < len(val) and part["sample_complete"] == 0
    assert (
        sum(len(s.encode()) for s in read[:-1])
        < limit
        <= part["sample_bytes"]
        == sum(len(s.encode()) for s in read)
    )
    assert {k: v for k, v in tokenizer_stats(tok, read).items() if k != "sample_complete"} == {
        k: v for k, v in part.items() if k != "sample_complete"
    }


def test_a_corpus_over_train_mb_trains_on_every_kth_document(tokenizer_cfg):
    """Over `tokenizer.train_mb` the trainer reads an evenly spaced sample: documents 0, k, 2k, ...
    of the split, k the smallest stride that fits, and the report says so; under it, every document."""
    prepared = Path(tokenizer_cfg.data.prepared_dir)
    docs = list(read_split(prepared, "train"))
    shard = prepared / "train-00000.jsonl"
    size_mb = shard.stat().st_size / 1e6
    report = Path(tokenizer_cfg.tokenizer.reports_dir) / "wp.json"

    entry_stage("train_tokenizer")(tokenizer_cfg)  # the default 32 MB holds the whole split
    whole = json.loads(report.read_text())
    assert (whole["train_every"], whole["train_documents"]) == (1, len(docs))
    assert whole["train_sentences"] == sum(len(d.sentences) for d in docs)

    tokenizer_cfg.tokenizer.train_mb = size_mb / 3.5  # a stride of 4
    entry_stage("train_tokenizer")(tokenizer_cfg)
    sampled = json.loads(report.read_text())
    kept = docs[::4]
    assert (sampled["train_every"], sampled["train_documents"]) == (4, len(kept))
    assert sampled["train_sentences"] == sum(len(d.sentences) for d in kept)
    # the tokenizer is the one trained on exactly those documents
    direct = train_tokenizer(
        tokenizer_config(tokenizer_cfg.tokenizer), [[s for d in kept for s in d.sentences]]
    )
    saved = load_tokenizer(Path(tokenizer_cfg.tokenizer.dir) / "wp")
    assert saved.get_vocab() == direct.get_vocab()


def test_the_sample_stride_counts_across_shards(tmp_path):
    docs = [Document(f"d{i}", "test", (f"Sentence {i}.",)) for i in range(7)]
    write_prepared(tmp_path, {"train": docs}, shard_bytes=1)  # one document a shard
    files = split_files(tmp_path, "train")
    assert len(files) == 7
    assert [d.id for d in every_kth(files, 3)] == [docs[i].id for i in (0, 3, 6)]
    total_mb = sum(f.stat().st_size for f in files) / 1e6
    assert sample_stride(files, 0) == 1 and sample_stride(files, total_mb) == 1
    assert sample_stride(files, total_mb * 0.6) == 2 and sample_stride(files, total_mb * 0.4) == 3
