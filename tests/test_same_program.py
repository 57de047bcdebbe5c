"""scripts/same_program.py: two versions of a stage's code are one program when every name its entry
point reaches denotes a definition of the same form, wherever it lives; each test builds a tiny
repository twice (a base and a change) and asks."""

from __future__ import annotations

from pathlib import Path

from scripts.same_program import same_program

ENTRY = "pipelines/job.py"
BASE = {
    ENTRY: "from lmforge.door import cli\nfrom lmforge.work import run\n\nSTAGE = run\n\n"
    'if __name__ == "__main__":\n    cli(STAGE)\n',
    "src/lmforge/__init__.py": "",
    "src/lmforge/door.py": "import sys\n\n\ndef cli(stage):\n    _log(stage())\n    sys.exit(2)\n\n\n"
    "def _log(value):\n    print(value)\n",
    "src/lmforge/work.py": "from __future__ import annotations\n\nSCALE = 2\n\n\n"
    "def run(x: int = 3) -> int:\n    return SCALE * helper(x)\n\n\ndef helper(x):\n    return x + 1\n",
}


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def verdict(tmp_path: Path, change: dict[str, str | None], observing: tuple[str, ...] = ()) -> str | None:
    files = {**BASE, **change}
    now = {k: v for k, v in files.items() if v is not None}
    return same_program(tree(tmp_path / "base", BASE), tree(tmp_path / "now", now), [ENTRY], observing)


def test_the_same_code_is_one_program(tmp_path):
    assert verdict(tmp_path, {}) is None


def test_a_definition_moved_renamed_and_imported_lazily_is_the_same_program(tmp_path):
    moved = {
        "src/lmforge/work.py": "from __future__ import annotations\n\nSCALE = 2\n\n\n"
        "def run(x: str = 3) -> None:\n    from lmforge.helpers import plus_one\n\n"
        "    return SCALE * plus_one(x)\n",  # the annotation is text nothing evaluates
        "src/lmforge/helpers.py": '"""Helpers."""\n\n\ndef plus_one(x):\n    """One more."""\n    return x + 1\n',
    }
    assert verdict(tmp_path, moved) is None


def test_a_changed_constant_anywhere_it_is_reached_is_another_program(tmp_path):
    why = verdict(tmp_path, {"src/lmforge/work.py": BASE["src/lmforge/work.py"].replace("x + 1", "x + 2")})
    assert why == "lmforge.work.helper differs from lmforge.work.helper"
    why = verdict(
        tmp_path, {"src/lmforge/work.py": BASE["src/lmforge/work.py"].replace("SCALE = 2", "SCALE = 3")}
    )
    assert why is not None and "SCALE" in why
    why = verdict(
        tmp_path, {"src/lmforge/door.py": BASE["src/lmforge/door.py"].replace("exit(2)", "exit(3)")}
    )
    assert why == "lmforge.door.cli differs from lmforge.door.cli"


def test_an_import_of_another_definition_of_the_same_name_is_another_program(tmp_path):
    other = {
        "src/lmforge/other.py": "def helper(x):\n    return x - 1\n",
        "src/lmforge/work.py": BASE["src/lmforge/work.py"]
        .replace("SCALE = 2", "from lmforge.other import helper\n\nSCALE = 2")
        .replace("\n\ndef helper(x):\n    return x + 1\n", "\n"),
    }
    assert verdict(tmp_path, other) == "lmforge.other.helper differs from lmforge.work.helper"


def test_a_local_of_one_function_does_not_hide_a_global_another_reads(tmp_path):
    base_text = (
        "SCALE = 2\n\n\ndef run():\n    return SCALE * 2\n\n\ndef unrelated(SCALE):\n    return SCALE\n"
    )
    files = {
        ENTRY: BASE[ENTRY],
        "src/lmforge/work.py": base_text,
    }
    base = tree(tmp_path / "base", {**BASE, **files})
    now = tree(
        tmp_path / "now",
        {**BASE, **files, "src/lmforge/work.py": base_text.replace("SCALE = 2", "SCALE = 5")},
    )
    assert same_program(base, now, [ENTRY], ()) is not None


def test_a_class_that_moves_module_is_refused_unless_it_moves_into_observability(tmp_path):
    base_files = {
        **BASE,
        "src/lmforge/work.py": BASE["src/lmforge/work.py"] + "\n\nclass Box:\n    size = 1\n",
        ENTRY: BASE[ENTRY].replace("STAGE = run", "from lmforge.work import Box\n\nSTAGE = run\nKIND = Box"),
    }
    now_files = {
        **base_files,
        "src/lmforge/work.py": BASE["src/lmforge/work.py"],
        "src/lmforge/watch.py": "class Box:\n    size = 1\n",
        ENTRY: base_files[ENTRY].replace("from lmforge.work import Box", "from lmforge.watch import Box"),
    }
    base, now = tree(tmp_path / "base", base_files), tree(tmp_path / "now", now_files)
    assert same_program(base, now, [ENTRY], ()) == "class Box moved from lmforge.work to lmforge.watch"
    assert same_program(base, now, [ENTRY], ("lmforge.watch",)) is None


def test_what_runs_at_import_must_stay_the_same(tmp_path):
    work = BASE["src/lmforge/work.py"]
    assert verdict(tmp_path / "a", {"src/lmforge/work.py": work + "\nprint('loaded')\n"}) == (
        "lmforge.work: what it runs at import changed"
    )
    assert verdict(tmp_path / "b", {"src/lmforge/work.py": work + "\nUNUSED = True\n"}) is None  # no call
    assert verdict(tmp_path / "c", {"src/lmforge/work.py": work + "\nHANDLE = open('x', 'w')\n"}) == (
        "lmforge.work.HANDLE: calls at import in one version only"
    )
    new_module = {
        "src/lmforge/extra.py": "import os\n\nos.environ['X'] = '1'\n\n\ndef helper(x):\n    return x + 1\n",
        "src/lmforge/work.py": work.replace(
            "SCALE = 2", "from lmforge.extra import helper\n\nSCALE = 2"
        ).replace("\n\ndef helper(x):\n    return x + 1\n", "\n"),
    }
    assert verdict(tmp_path / "d", new_module) == (
        "lmforge.extra, imported in one version only, runs statements at import"
    )


def test_file_relative_paths_must_not_move_folder(tmp_path):
    base_files = {**BASE, "src/lmforge/work.py": BASE["src/lmforge/work.py"] + "\nHERE = __file__\n"}
    base_files[ENTRY] = base_files[ENTRY].replace(
        "STAGE = run", "from lmforge.work import HERE\n\nSTAGE = run\nAT = HERE"
    )
    now_files = {
        **base_files,
        "src/lmforge/sub/__init__.py": "",
        "src/lmforge/sub/paths.py": "HERE = __file__\n",
        ENTRY: base_files[ENTRY].replace(
            "from lmforge.work import HERE", "from lmforge.sub.paths import HERE"
        ),
    }
    base, now = tree(tmp_path / "base", base_files), tree(tmp_path / "now", now_files)
    assert "reads __file__ from another folder" in same_program(base, now, [ENTRY], ())


def test_a_dataclass_field_annotation_is_part_of_the_form(tmp_path):
    base_files = {
        **BASE,
        "src/lmforge/work.py": "from __future__ import annotations\n\nfrom dataclasses import dataclass\n\n\n"
        "@dataclass\nclass Config:\n    size: int = 1\n\n\ndef run():\n    return Config()\n",
    }
    now_files = {
        **base_files,
        "src/lmforge/work.py": base_files["src/lmforge/work.py"].replace("size: int", "size: ClassVar"),
    }
    base, now = tree(tmp_path / "base", base_files), tree(tmp_path / "now", now_files)
    assert same_program(base, now, [ENTRY], ()) == "lmforge.work.Config differs from lmforge.work.Config"


def test_a_constant_moved_under_another_name_is_the_same_program_but_not_one_unpacked_otherwise(tmp_path):
    renamed = BASE["src/lmforge/work.py"].replace("SCALE = 2", "from lmforge.consts import FACTOR as SCALE")
    assert (
        verdict(tmp_path / "a", {"src/lmforge/work.py": renamed, "src/lmforge/consts.py": "FACTOR = 2\n"})
        is None
    )
    unpacked = BASE["src/lmforge/work.py"].replace("SCALE = 2", "SCALE, OTHER = 2, 3")
    swapped = BASE["src/lmforge/work.py"].replace("SCALE = 2", "OTHER, SCALE = 2, 3")
    base = {**BASE, "src/lmforge/work.py": unpacked}
    why = same_program(tree(tmp_path / "b", base), tree(tmp_path / "c", {**BASE, "src/lmforge/work.py": swapped}),
                       [ENTRY], ())  # fmt: skip
    assert why == "lmforge.work.SCALE differs from lmforge.work.SCALE"
