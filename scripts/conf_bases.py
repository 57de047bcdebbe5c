"""Writes conf/<group>/base.yaml for every config group a stage parses: each field of the group's
dataclass at its default, so the default lives in the dataclass alone. Every preset of the group
lists `base` first in its defaults and only the values it changes; the composed config still holds
every field, so any of them can be overridden on the command line without Hydra's `+`.
tests/test_conf_bases.py fails while a base.yaml disagrees with its dataclass or a preset restates a
default.

python -m scripts.conf_bases          # rewrite every conf/<group>/base.yaml
"""

from pathlib import Path

import yaml

import pipelines
from lmforge.io import write_text
from lmforge.structured import Group, defaults

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"


def groups() -> dict[str, Group]:
    """Each config group some stage parses (the stages of `pipelines.STAGES`), by name, with its schema."""
    found: dict[str, Group] = {}
    for name in pipelines.STAGES:
        for key, parse in pipelines.stage(name).reads.items():
            if isinstance(parse, Group):
                found[key] = parse
    return dict(sorted(found.items()))


class _Dumper(yaml.SafeDumper):
    """Block mappings, flow lists (`betas: [0.9, 0.95]`), as the hand-written presets read."""


_Dumper.add_representer(
    list, lambda dumper, value: dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=True)
)


def render(group: Group) -> str:
    values = defaults(group.schema)
    if group.label is not None:  # a preset's label, where the schema has no field for it
        values = {"name": group.label, **values}
    header = (
        f"# Every field of {group.schema.__qualname__} ({group.schema.__module__}) at its default.\n"
        "# Written by `python -m scripts.conf_bases`: change the dataclass, not this file. Each preset\n"
        f"# of conf/{group.name}/ lists `base` first in its defaults and only the values it changes.\n"
    )
    return header + yaml.dump(values, Dumper=_Dumper, default_flow_style=False, sort_keys=False, width=100)


if __name__ == "__main__":
    for name, group in groups().items():
        write_text(CONF / name / "base.yaml", render(group))  # atomic: Hydra never reads half a file
