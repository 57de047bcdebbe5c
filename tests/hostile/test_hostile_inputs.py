"""A hostile-input set run through the entry points' stages (`execute`, as `pipelines/*.py` call
it): empty, binary, mis-encoded, huge single-line, control-character and special-token corpora,
and a corrupt tokenizer. Each ends in clean output or in one `error:` line with exit status 2,
and never destroys what an earlier run wrote."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import pipelines
from helpers import stage_config, write_corpus
from lmforge.door import execute
from lmforge.tokenizer.specials import load_tokenizer, special_token_ids

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["logger=none", "tokenizer=bpe", "tokenizer.vocab_size=400", "tokenizer.n_sentinels=4"]


def _stage(script: str):
    return pipelines.stage(script)


def _run(script: str, *overrides: str):
    return execute(_stage(script), stage_config(*SMALL, *overrides))


def _fails(capsys, script: str, *overrides: str) -> str:
    with pytest.raises(SystemExit) as info:
        _run(script, *overrides)
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and err.startswith("error: ") and "\n" not in err, err
    return err


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_corpus(tmp_path / "corpus", n_documents=12)
    _run("prepare")  # a good earlier run whose outputs must survive the bad ones
    return tmp_path


def _prepared(workspace: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((workspace / "data/prepared").iterdir())}


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("empty", {}, "yielded no documents"),
        ("blank", {"a.txt": b"", "b.txt": b"   \n\n"}, "yielded no documents"),
        ("binary", {"a.txt": bytes(range(256)) * 8}, "is not valid UTF-8"),
        (
            "latin1",
            {"a.txt": "Caf\u00e9 na\u00efve d\u00e9j\u00e0 vu.".encode("latin-1")},
            "is not valid UTF-8",
        ),
        ("badjson", {"a.jsonl": b'{"text": "ok"}\n{not json}\n'}, "is not a JSON object"),
    ],
)
def test_bad_corpora_fail_in_one_line_and_keep_earlier_outputs(workspace, capsys, name, content, needle):
    before = _prepared(workspace)
    folder = workspace / name
    folder.mkdir()
    for file, data in content.items():
        (folder / file).write_bytes(data)
    assert needle in _fails(capsys, "prepare", f"data.local.path={folder}")
    assert _prepared(workspace) == before


def test_an_over_long_document_is_refused_in_one_line(workspace, capsys):
    before = _prepared(workspace)
    folder = workspace / "long"
    folder.mkdir()
    for d in range(3):
        (folder / f"ok{d}.txt").write_text(f"Short document {d}. It has two sentences.\n", encoding="utf-8")
    (folder / "huge.txt").write_text("word " * 420_000, encoding="utf-8")  # 2.1 MB on one line
    err = _fails(capsys, "prepare", f"data.local.path={folder}")
    assert "document huge.txt has 2,099,999 characters" in err and "data.max_document_chars=2,000,000" in err
    assert _prepared(workspace) == before
    _run("prepare", f"data.local.path={folder}", "data.max_document_chars=3000000")  # raised: accepted


def test_control_characters_and_boms_are_dropped_and_counted(workspace, capsys):
    folder = workspace / "controls"
    folder.mkdir()
    for d in range(8):
        text = f"\ufeffThe jury\x00 said {d} things.\x07 It was\x1b late. Nobody\u200b left the room at all."
        (folder / f"d{d}.txt").write_text(text * 3, encoding="utf-8")
    metrics = _run("prepare", f"data.local.path={folder}").metrics
    assert metrics["chars_dropped_bom"] == 8 * 3 and metrics["chars_dropped_control"] == 8 * 3 * 3
    said = capsys.readouterr().out  # the repair is said in the stage's output, not only counted
    assert "prepare: dropped 24 byte-order marks (U+FEFF), 72 control characters (NUL" in said, said
    text = "".join(p.read_text(encoding="utf-8") for p in (workspace / "data/prepared").glob("*.jsonl"))
    assert "\ufeff" not in text and "\\u0000" not in text and "\\u0007" not in text and "\\u001b" not in text
    assert "chars_dropped_control" in json.loads((workspace / "reports/data.json").read_text())
    assert "control characters" in (workspace / "reports/data_card.md").read_text()


def test_a_huge_single_line_and_special_token_text_go_through_every_stage(workspace):
    folder = workspace / "odd"
    folder.mkdir()
    words = " ".join(f"word{i % 5000}" for i in range(150_000))  # ~1.4 MB on one line, no full stop
    (folder / "huge.txt").write_text(words, encoding="utf-8")
    hostile = "Text with [MASK] and [CLS] and <|endoftext|> and <extra_id_0> and <pad> in it. "
    for d in range(6):
        (folder / f"s{d}.txt").write_text(f"Part {d}. " + hostile * 20 + "\n", encoding="utf-8")
    _run("prepare", f"data.local.path={folder}", "data.val_fraction=0.2", "data.test_fraction=0.2")
    for kind in ("bpe", "wordpiece"):
        _run("train_tokenizer", f"data.local.path={folder}", f"tokenizer={kind}")
        _run("encode", f"data.local.path={folder}", f"tokenizer={kind}")
        tokenizer = load_tokenizer(workspace / "artifacts/tokenizers" / kind)
        s = special_token_ids(tokenizer)
        specials = {
            i for i in (s.pad, s.cls, s.sep, s.mask, s.eos, *s.sentinels) if i is not None
        }  # [UNK] is text
        for split in ("train", "val", "test"):
            tokens = np.fromfile(workspace / "data/encoded" / kind / f"{split}.bin", dtype=np.uint16)
            assert not set(np.unique(tokens).tolist()) & specials


def test_a_corrupt_tokenizer_file_is_one_line(workspace, capsys):
    _run("train_tokenizer")
    path = workspace / "artifacts/tokenizers/bpe/tokenizer.json"
    path.write_text(path.read_text()[:1000])
    assert "is not a valid tokenizer.json" in _fails(capsys, "encode")
    assert not (workspace / "data/encoded/bpe").exists() or os.listdir(workspace / "data/encoded/bpe") == []
