"""Which stages are owed a rerun, and why, from the committed locks and the code alone.

A stage is **stale** when something it depends on changed since its lock entry was written: a code or
config file, its command (DVC's hashing), or an output of another stage it reads (the producer's lock
entry now records another md5 than the one it read). It is **owed** when it is stale, was never run,
or reads an output of an owed stage (listed "after" that stage). A stage whose outputs are merely
absent from this machine, with nothing changed, is **not built**: it is not owed, and is listed apart.
None of this looks at the artifacts on disk, so every clone of a commit says the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lmforge.freshness.lineage import CODE, Lineage, code_changes, load, out_md5, pipeline_of


@dataclass
class Owed:
    id: str
    changed: list[str] = field(
        default_factory=list
    )  # what changed since it ran ("never run" for a new stage)
    after: list[str] = field(default_factory=list)  # owed stages whose outputs it reads
    measured_at: str | None = None  # the commit its lock entry certifies
    seconds: float | None = None  # its last run's duration (None: never timed)
    at_least: bool = False  # the last run was stopped: it needs more than `seconds`


@dataclass
class Status:
    owed: list[Owed]  # in the order a catch-up runs them
    not_built: list[str]  # not owed, outputs absent here
    lineage: Lineage

    def of(self, pipeline: str) -> list[Owed]:
        return [o for o in self.owed if pipeline_of(o.id) == pipeline]

    @property
    def hours(self) -> float:
        return sum(o.seconds or 0.0 for o in self.owed) / 3600

    @property
    def untimed(self) -> list[str]:
        return [o.id for o in self.owed if o.seconds is None]


def direct_changes(lineage: Lineage, code: dict[str, list[str]]) -> dict[str, list[str]]:
    """Stage id -> what changed under it since its lock entry (its own deps; not its producers' state)."""
    found: dict[str, list[str]] = {}
    for sid, stage in lineage.stages.items():
        entry = lineage.locks.get(sid)
        if entry is None:
            found[sid] = ["never run"]
            continue
        changed = [
            c
            for c in code.get(sid, [])
            if not lineage.producers(c.removesuffix(" (params)"))
            and (Path(c).parts[0] in CODE or (lineage.root / c.removesuffix(" (params)")).exists())
        ]  # a change dvc status sees in a file no stage writes (code, config, a committed file)
        recorded = {d["path"]: d for d in entry.get("deps", [])}
        then = lineage.runs.get(sid, {}).get("inputs", {})
        for dep in stage.deps:
            hits = lineage.producers(dep)
            if dep not in recorded:
                if hits or Path(dep).parts[0] not in CODE:
                    changed.append(f"{dep} (a new dependency)")
                continue
            now = {out: out_md5(lineage.locks, p, out) for p, out in hits}
            if not hits or None in now.values():
                continue  # no stage writes it (judged above), or its writer never ran (owed after it)
            if [out for _, out in hits] == [dep]:
                moved = [hits[0][0]] if recorded[dep].get("md5") != now[dep] else []
            else:  # not one output exactly: the outputs' md5s when this stage ran
                moved = [p for p, out in hits if then.get(dep, {}).get(out) != now[out]]
            if moved:
                changed.append(f"{dep} ({short([m.split(':')[-1] for m in moved], 2)} reran)")
        if changed:
            found[sid] = sorted(dict.fromkeys(changed))
    return found


def compute(root: Path, lineage: Lineage | None = None, code: dict[str, list[str]] | None = None) -> Status:
    lineage = load(root) if lineage is None else lineage
    changes = direct_changes(lineage, code_changes(root) if code is None else code)
    upstream = lineage.consumers()
    owed: dict[str, Owed] = {}
    for sid in lineage.order():
        after = sorted(u for u in upstream[sid] if u in owed)
        if sid in changes or after:
            run = lineage.runs.get(sid, {})
            seconds = run.get("seconds")
            owed[sid] = Owed(
                sid,
                changes.get(sid, []),
                after,
                run.get("commit") if sid in lineage.locks else None,
                None if seconds is None else float(seconds),
                bool(run.get("at_least", False)),
            )
    not_built = [
        sid
        for sid in lineage.order()
        if sid not in owed and any(not (root / out).exists() for out in lineage.stages[sid].outs)
    ]
    return Status(list(owed.values()), not_built, lineage)


def minutes(seconds: float | None, at_least: bool = False) -> str:
    if seconds is None:
        return "not timed"
    return f"{'> ' if at_least else ''}{seconds / 60:.1f} min"


def short(items: list[str], n: int = 3) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def render(status: Status) -> str:
    """What `make status` prints."""
    lines = []
    if not status.owed:
        lines.append("Nothing is owed: every stage of every pipeline is current with the code.")
    else:
        lines.append(f"Owed, in the order `make catch-up` runs them ({len(status.owed)} stages):")
        for o in status.owed:
            why = short(o.changed, 2) if o.changed else ""
            if o.after:
                why = "; ".join(filter(None, [why, f"after {short(o.after, 2)}"]))
            at = f", measured at {o.measured_at}" if o.measured_at else ""
            lines.append(f"  {o.id}  [{minutes(o.seconds, o.at_least)}{at}]  {why}")
        timed = len(status.owed) - len(status.untimed)
        if status.untimed:
            lines.append(
                f"A catch-up costs at least {status.hours:.1f} h on this machine: the {timed} stages timed "
                f"here add up to that, and {len(status.untimed)} were never timed (a catch-up times each "
                "as it runs it)"
            )
        else:
            lines.append(
                f"A catch-up costs {status.hours:.1f} h on this machine ({timed} stages, as last timed)"
            )
    if status.not_built:
        lines.append(
            f"Not built on this machine, nothing changed (not owed; built when an owed stage needs it): "
            f"{len(status.not_built)} stages: {short(status.not_built, 6)}"
        )
    return "\n".join(lines)
