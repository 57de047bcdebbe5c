"""Readers: each turns the reports of one kind of experiment into a claim's parts, the numbers the
findings report shows, and its figure. A reader holds no report path or key: it reads those from its
claim's row (`claim.sources`, `claim.keys`), and it decides nothing (the row's rule does).

Hand-written computation lives here only where a report does not yet carry the comparison a claim
needs in the summaries' schema ({difference, low, high, seeds}):
- `learning_curves`: Welch intervals of pretrained minus scratch at each label budget (the curves
  report means and spreads per row);
- `warmup_penalties`: the Post-LN and Pre-LN penalties of dropping warmup, paired by seed;
- `lora_comparisons`: the share of trained weights;
- `kv_heads`, `norms`, `scaling`, `induction`: flags and ratios that are not differences.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lmforge.findings.claim import Claim
from lmforge.findings.config import FindingsConfig
from lmforge.findings.evidence import Evidence, MissingEvidence
from lmforge.findings.figures import bars, forest
from lmforge.findings.rules import Interval, Measured, Part, welch
from lmforge.stats import paired


def _selected(summary: dict, pattern: str) -> dict[str, tuple[re.Match, dict]]:
    """A summary's comparisons whose name matches `pattern`: name -> (match, comparison)."""
    return {k: (m, d) for k, d in sorted(summary["comparisons"].items()) if (m := re.search(pattern, k))}


def _part(match: re.Match) -> str:
    """A comparison's part: its task, and the corpus when the selected row names one (`corpus`)."""
    corpus = match.groupdict().get("corpus")
    return match["part"] if not corpus else f"{match['part']}, data={corpus}"


def comparisons_by_budget(ev: Evidence, claim: Claim, cfg: FindingsConfig, figures: Path) -> Measured:
    """Fine-tuning summaries' comparisons (`keys.select`, its `part` group naming the task), one
    source per budget (`sources`, in the order they are shown): a part per task and budget."""
    by_budget: dict[str, dict[str, Interval]] = {}
    unread = ""
    for budget, path in claim.sources.items():
        try:
            summary = ev.json(path)
        except MissingEvidence as err:
            if budget == next(iter(claim.sources)):
                raise
            unread += f" (fine-tuning {budget} not read: {err})"
            continue
        found = _selected(summary, claim.keys["select"])
        by_budget[budget] = {_part(m): Interval.of(d, "difference") for m, d in found.values()}
    shown = {f"{part} ({budget})": d for budget, rows in by_budget.items() for part, d in rows.items()}
    figure = forest(shown, 100, "points", figures / claim.figure, claim.keys["figure_title"])
    return Measured(
        parts=[
            Part(name, {"difference": d}, note=f"{claim.keys['quantity']} {d.points()}")
            for name, d in shown.items()
        ],
        figure=figure,
        words={"unread": unread},
    )


def _label_budget(key: str) -> float:
    return float("inf") if not key.isdigit() else float(key)


def learning_curves(ev: Evidence, claim: Claim, cfg: FindingsConfig, figures: Path) -> Measured:
    """Per task, pretrained minus scratch at each label budget (Welch over the rows' seeds)."""
    curves = ev.json(claim.sources["curves"])
    parts, numbers = [], []
    for task, lines in sorted(curves.items()):
        ours, scratch = (
            lines.get(claim.keys["ours"].format(task=task)),
            lines.get(claim.keys["scratch"].format(task=task)),
        )
        if not ours or not scratch:
            continue
        budgets = sorted(set(ours) & set(scratch), key=_label_budget)
        gaps = {
            n: welch(
                ours[n]["mean"], ours[n]["std"], ours[n]["seeds"],
                scratch[n]["mean"], scratch[n]["std"], scratch[n]["seeds"],
            )
            for n in budgets
        }  # fmt: skip
        numbers += [(f"{task}, {n} labels: {claim.keys['quantity']}", gaps[n].points()) for n in budgets]
        note = f"{budgets[0]} labels {gaps[budgets[0]].points()}; all {gaps[budgets[-1]].points()}"
        parts.append(Part(task, {"fewest": gaps[budgets[0]], "most": gaps[budgets[-1]]}, note=note))
    return Measured(parts, numbers, ev.path(claim.sources["figure"]))


def distill_summary(ev: Evidence, claim: Claim, cfg: FindingsConfig, figures: Path) -> Measured:
    """Per family and task: the student's retention and the student minus its control, which decide
    the part, and teacher minus scratch, which says whether the teacher had anything to pass on."""
    summary = ev.json(claim.sources["summary"])
    parts, numbers, intervals = [], [], {}
    for family, record in sorted(summary.items()):
        for task in sorted(record["tasks"]):
            gap, keep, beat = (Interval.of(record[claim.keys[k]][task]) for k in ("gap", "keep", "beat"))
            name = f"{family} {task}"
            numbers += [
                (f"{name}: teacher - scratch", gap.points()),
                (f"{name}: student / teacher", keep.show(scale=100, digits=1, suffix="%", signed=False)),
                (f"{name}: student - control", beat.points()),
            ]
            intervals |= {f"{name}: teacher - scratch": gap, f"{name}: student - control": beat}
            note = (
                f"retention {keep.show(scale=100, digits=1, suffix='%', signed=False)}, student - control "
                f"{beat.points()}"
            )
            # decided all the same, by its own intervals; the reader is told why it is weak
            if not gap.above():
                note += f"; the teacher does not beat scratch ({gap.points()}), so it has little to pass on"
            parts.append(Part(name, {"keep": keep, "beat": beat}, note=note))
    figure = forest(intervals, 100, "points", figures / claim.figure, claim.keys["figure_title"])
    return Measured(parts, numbers, figure, {"floor": f"{cfg.retention_floor:.0%}"})


def lora_comparisons(ev: Evidence, claim: Claim, cfg: FindingsConfig, figures: Path) -> Measured:
    """Each LoRA row against its fully fine-tuned twin (`keys.select`) in every source summary that
    can be read: a part per backbone and pair, judged against the margin."""
    parts, numbers, intervals, missing = [], [], {}, []
    margin = f"{100 * cfg.lora_margin:g} points"
    for backbone, path in claim.sources.items():
        try:
            summary = ev.json(path)
        except MissingEvidence as err:  # a missing or stale source leaves this backbone untested
            missing.append(f"{backbone} ({err})")
            continue
        selected = _selected(summary, claim.keys["select"])
        for key, (_, d) in selected.items():
            lora_row, _, full_row = key.partition("-vs-")
            diff = Interval.of(d, "difference")
            row = summary["rows"][lora_row]
            name = f"{backbone} ({lora_row} - {full_row})"
            part = backbone if len(selected) == 1 else name
            how = f"{d['seeds']} seeds"
            if "look" in d:  # a sequential design's look: its interval at the look's own level
                how += f", {100 * d['level']:g}% interval at look {d['look']} of {d['looks']}"
            numbers += [
                (name, f"{diff.points()}, {how}"),
                (f"{name}: trained weights", f"{row['params_trainable'] / row['params_total']:.1%}"),
            ]
            intervals[name] = diff
            parts.append(Part(part, {"difference": diff}, note=f"{diff.points()}, {how}"))
    figure = None
    if parts:
        figure = forest(
            intervals, 100, "points", figures / claim.figure, claim.keys["figure_title"], -cfg.lora_margin
        )
    return Measured(parts, numbers, figure, {"margin": margin, "missing": "; ".join(missing)})


def warmup_penalties(ev: Evidence, claim: Claim, cfg: FindingsConfig, figures: Path) -> Measured:
    """Post-LN's penalty for dropping warmup minus Pre-LN's (final validation loss), paired by seed."""
    summary = ev.json(claim.sources["summary"])

    def per_seed(cell: str) -> dict[int, float]:
        return {int(run.rsplit("-s", 1)[1]): r["final_val_loss"] for run, r in summary[cell]["runs"].items()}

    try:
        cells = {c: per_seed(c) for c in ("post-constant", "post-noam", "pre-constant", "pre-noam")}
    except KeyError as err:
        return Measured([], words={"missing": str(err)})
    seeds = sorted(set.intersection(*(set(v) for v in cells.values())))
    post = {s: cells["post-constant"][s] - cells["post-noam"][s] for s in seeds}
    pre = {s: cells["pre-constant"][s] - cells["pre-noam"][s] for s in seeds}
    d = paired(post, pre, ("Post-LN", "Pre-LN"))
    penalty_post = Interval.of(paired(post, {s: 0.0 for s in seeds}).to_dict())
    penalty_pre = Interval.of(paired(pre, {s: 0.0 for s in seeds}).to_dict())
    difference = Interval.of(d.to_dict())
    numbers = [
        ("Post-LN: no warmup - warmup (val loss, nats)", penalty_post.show()),
        ("Pre-LN: no warmup - warmup (val loss, nats)", penalty_pre.show()),
        (f"difference of the two, paired by seed ({d.n} seeds)", difference.show()),
        (
            "BLEU without warmup: Post-LN, Pre-LN",
            f"{summary['post-constant']['bleu']:.2f}, {summary['pre-constant']['bleu']:.2f}",
        ),
    ]
    pre_note = (
        "; warmup still helps Pre-LN (its own penalty's interval lies above zero)"
        if penalty_pre.above()
        else ""
    )
    return Measured(
        [Part("Post-LN's penalty - Pre-LN's", {"difference": difference}, note=difference.show())],
        numbers,
        ev.path(claim.sources["figure"]),
        {"pre_note": pre_note},
    )


def positions(ev: Evidence, claim: Claim, cfg: FindingsConfig, figures: Path) -> Measured:
    """Each scheme's loss past the training length minus within it, and that degradation minus
    learned positions'; the relative schemes (`keys.decided`) are the parts."""
    m = ev.json(claim.sources["metrics"])
    schemes = sorted({k.split("/")[1] for k in m if k.startswith(claim.keys["prefix"])})
    numbers, parts = [], []
    for p in schemes:
        degraded = next(v for k, v in m.items() if re.fullmatch(claim.keys["degradation"].format(p=p), k))
        numbers.append((f"{p}: loss past the training length minus within it (nats)", f"{degraded:+.3f}"))
        if p != claim.keys["reference"]:
            diff = Interval.flat(m, claim.keys["difference"].format(p=p))
            numbers.append((f"{p}: that degradation minus learned positions'", diff.show()))
            if p in claim.keys["decided"]:
                parts.append(Part(p, {"difference": diff}, note=f"{diff.show()} nats"))
    if claim.keys["reference"] not in schemes:
        parts = []
    return Measured(parts, numbers, ev.path(claim.sources["figure"]))


def kv_heads(ev: Evidence, claim: Claim, cfg: FindingsConfig, figures: Path) -> Measured:
    """Each KV-head count below the reference: the measured cache saving against n_heads/n_kv_heads,
    and the test loss minus MHA's."""
    m = ev.json(claim.sources["metrics"])
    kv = sorted({int(k.split("/")[1]) for k in m if k.startswith(claim.keys["prefix"])}, reverse=True)
    numbers, parts = [], []
    for k in kv[1:]:
        key = claim.keys["run"].format(k=k)
        heads, saving = m[f"{key}/n_heads"], m[f"{key}/kv_saving"]
        cost = Interval.flat(m, f"{key}/loss_minus_reference")
        numbers += [
            (
                f"{heads:.0f} query / {k} KV heads: KV bytes per token",
                f"{m[f'{key}/kv_bytes_per_token']:.0f} ({saving:.2f}x smaller; n_heads/n_kv_heads = {heads / k:.2f})",
            ),
            (f"{heads:.0f} query / {k} KV heads: test loss - MHA (nats)", cost.show()),
        ]
        note = f"{saving:.2f}x smaller (expected {heads / k:.2f}x), loss {cost.show()} nats"
        parts.append(
            Part(f"{k} KV heads", {"saving": saving, "expected": heads / k, "cost": cost}, note=note)
        )
    return Measured(parts, numbers, ev.path(claim.sources["figure"]))


def kv_cache(ev: Evidence, claim: Claim, cfg: FindingsConfig, figures: Path) -> Measured:
    """Greedy decoding with the cache against without it, one part per model and batch size: the
    generation benchmark's side-by-side ratio (a clock reading, so a benchmark's, not a stage's)."""
    bench = ev.json(claim.sources["bench"])
    found = sorted(
        ((m["model"], int(m["batch"])) for k in bench if (m := re.fullmatch(claim.keys["ratio"], k))),
        key=lambda mb: (mb[0], mb[1]),
    )
    if not found:
        return Measured([])
    parts, numbers, speedups = [], [], {}
    for model, batch in found:
        key = claim.keys["of"].format(model=model, batch=batch)
        cached, uncached, ratio = (bench[f"{key}.{side}"] for side in ("ours", "peer", "ratio"))
        speedups[f"{model}\nbatch {batch}"] = ratio
        numbers.append(
            (f"{model}, batch {batch}: with the cache, without (tokens/s)", f"{cached:.0f}, {uncached:.0f}")
        )
        parts.append(Part(f"{model} batch {batch}", {"speedup": ratio}, note=f"{ratio:.1f}x"))
    figure = bars(
        speedups, "speed-up of the KV cache (x)", figures / claim.figure, claim.keys["figure_title"]
    )
    return Measured(parts, numbers, figure, {"speedup": min(speedups.values())})


def norms(ev: Evidence, claim: Claim, cfg: FindingsConfig, figures: Path) -> Measured:
    """RMSNorm against LayerNorm: the test loss difference of the architecture experiment, and the
    train step's speed ratio at each width the norms benchmark timed side by side (the two parts of
    "as good, and faster"; a clock is a benchmark's reading, never a stage's)."""
    m = ev.json(claim.sources["metrics"])
    loss = {n: m.get(claim.keys["loss"].format(n=n)) for n in ("layer", "rms")}
    if None in loss.values():
        return Measured([])
    cost = Interval.flat(m, claim.keys["difference"])
    numbers = [
        ("test loss: LayerNorm, RMSNorm (nats)", f"{loss['layer']:.3f}, {loss['rms']:.3f}"),
        ("RMSNorm - LayerNorm (nats)", cost.show()),
    ]
    parts = [Part("loss", {"cost": cost}, note=f"RMSNorm - LayerNorm {cost.show()} nats")]
    try:
        bench = ev.json(claim.sources["bench"])
    except MissingEvidence as err:
        numbers.append(("RMSNorm / LayerNorm by width", f"not read ({err})"))
        bench = {}
    widths = sorted(int(m["w"]) for k in bench if (m := re.fullmatch(claim.keys["bench_step"], k)))
    speeds = {}
    for w in widths:
        step, op = (bench[claim.keys[k].format(w=w)] for k in ("bench_step_of", "bench_op_of"))
        compiled = bench.get(claim.keys["bench_op_compiled_of"].format(w=w))
        speeds[f"{w} wide"] = step
        numbers.append(
            (
                f"{w} wide: RMSNorm's speed / LayerNorm's: a training step; the norm alone; compiled",
                f"{step:.2f}x; {op:.2f}x; " + (f"{compiled:.2f}x" if compiled is not None else "not timed"),
            )
        )
        parts.append(
            Part(
                f"speed at {w} wide",
                {"ratio": 1 / step},
                note=f"a 4-layer decoder's step {step:.3f}x as fast",
            )
        )
    figure = (
        bars(
            speeds,
            "train step speed, RMSNorm / LayerNorm",
            figures / claim.figure,
            claim.keys["figure_title"],
        )
        if speeds
        else None
    )
    return Measured(parts, numbers, figure, {"speedup": speeds.get("64 wide", float("nan"))})


def _law(fit: dict) -> list[tuple[str, str]]:
    law, ci = fit["law"], fit["law_ci"]
    rows = [
        (name, f"{law[name]:.3g} [{ci[name][0]:.3g}, {ci[name][1]:.3g}]") for name in ("alpha", "beta", "E")
    ]
    rows.append(
        (
            "held-out cells: mean relative error of the law",
            f"{100 * fit['holdout']['mean_abs_rel_error']:.1f}%",
        )
    )
    return rows


def scaling(ev: Evidence, claim: Claim, cfg: FindingsConfig, figures: Path) -> Measured:
    """Each sweep's fitted law and whether it is identified, and the IsoFLOP slices' tokens per
    parameter beside Chinchilla's."""
    numbers, parts = [], []
    for sweep, path in claim.sources.items():
        if sweep.startswith("figure"):
            continue
        try:
            fit = ev.json(path)
        except MissingEvidence as err:  # a missing or stale sweep leaves its rows out
            numbers.append((f"{sweep} sweep", f"not read ({err})"))
            continue
        numbers += [(f"{sweep} sweep: {q}", v) for q, v in _law(fit)]
        law, ci = fit["law"], fit["law_ci"]
        note = ", ".join(f"{n} {law[n]:.3g} [{ci[n][0]:.3g}, {ci[n][1]:.3g}]" for n in ("alpha", "beta"))
        parts.append(Part(f"{sweep} sweep", {"identified": all(fit["identified"].values())}, note=note))
        for name, iso in (("non-embedding", fit["isoflop"]), ("all", fit["isoflop_other"])):
            for row in iso.get("tokens_per_parameter", []):
                numbers.append(
                    (
                        f"{sweep} sweep, C = {row['budget']:.2e}: tokens per parameter (N = {name} parameters)",
                        f"{row['value']:.0f} [{row['ci'][0]:.0f}, {row['ci'][1]:.0f}] "
                        f"(Chinchilla: {cfg.chinchilla_tokens_per_parameter:g})",
                    )
                )
    read = {p.name.removesuffix(" sweep") for p in parts}
    figure = ev.path(claim.sources["figure large" if "large" in read else "figure default"])
    return Measured(parts, numbers, figure if parts else None)


def _head_score(row: dict) -> list[float]:
    """A study row's head score: the shifted score where the summary has it (lmforge.induction.summary),
    else the textbook one of summaries written before it."""
    return row.get("head_score", row["max_induction_score"])


def induction(ev: Evidence, claim: Claim, cfg: FindingsConfig, figures: Path) -> Measured:
    """Per decoder, two parts: whether heads above the induction threshold copy repeated text, and
    the in-context-learning score's interval at the end of training; then a part per run of the
    repeated-span study. A missing head refutes only where the design could have seen one form: where
    the study's positive control (a random-token task, where nothing but copying predicts the copies)
    formed a head within its budget. Each part carries `control` for the rule."""
    try:  # the repeated-span study (pipelines/experiments: induction), when it has run
        study: dict | None = ev.json(claim.sources["study"])
        missing = ""
    except MissingEvidence as err:
        study, missing = None, str(err)
    rows = study["shares"] if study else []
    controls = [row for row in rows if row.get("data", "text") != "text"]
    formed_control = any(row["verdict"] == "forms" for row in controls)
    if formed_control:
        control_note = "the positive control formed a head"
    elif controls:
        best = max(controls, key=lambda row: _head_score(row)[0])
        control_note = (
            f"no positive control formed a head (best: {best['label']}, "
            f"{_head_score(best)[0]:.3f} at step {best['steps']}), so no absence here refutes"
        )
    else:
        control_note = "no positive control was run, so no absence here refutes"

    parts, numbers, formed = [], [], []
    for name, label in claim.keys["decoders"].items():
        report = ev.json(claim.sources["report"].format(name=name))
        last = report["trajectory"][-1]
        icl = Interval(last["icl_score"], *last["icl_interval"])
        heads = bool(report["induction_heads"]) and report["repeat_gain"] >= cfg.induction_gain_floor
        largest = max(max(layer) for layer in report["induction_scores"])
        shifted = report.get("max_shifted_score")  # reports written before the shifted score lack it
        formed += [name] if heads else []
        parts += [
            Part(
                f"induction heads in the {label}",
                {"heads": heads, "control": formed_control},
                note=f"largest score {largest:.3f}"
                + ("" if shifted is None else f", shifted {shifted:.3f}")
                + f" (threshold {report['induction_threshold']}), first copy - "
                f"second {report['repeat_gain']:+.2f} nats" + ("" if heads else f"; {control_note}"),
            ),
            Part(f"in-context learning in the {label}", {"icl": icl}, note=f"ICL score {icl.show()} nats"),
        ]
        numbers += [
            (
                f"{label}: repeated random tokens, loss on the first copy, the second (nats)",
                f"{report['first_copy_loss']:.2f}, {report['second_copy_loss']:.2f}",
            ),
            (
                f"{label}: largest induction score of any head (textbook"
                + ("" if shifted is None else ", shifted")
                + ")",
                f"{largest:.3f}"
                + ("" if shifted is None else f", {shifted:.3f}")
                + f" (threshold {report['induction_threshold']}; heads above: "
                f"{', '.join(report['induction_heads']) or 'none'})",
            ),
        ]
        numbers += [
            (
                f"{label}: ICL score at step {t['step']} (nats)",
                Interval(t["icl_score"], *t["icl_interval"]).show(),
            )
            for t in report["trajectory"]
        ]
    # the figure of a decoder where heads formed, else of the cleanest place to look (the last)
    shown = formed[0] if formed else list(claim.keys["decoders"])[-1]
    figure = ev.path(claim.sources["figure"].format(name=shown))
    if study is None:
        numbers.append(("the repeated-span study", f"not read ({missing})"))
        return Measured(parts, numbers, figure)
    numbers.append(("the study's positive control (random tokens)", control_note))
    for row in rows:
        score = Interval(*_head_score(row))
        first = ", ".join(
            "never" if s is None else str(s) for s in row["first_step_above_threshold"].values()
        )
        task = row.get("data", "text") != "text"
        parts.append(
            Part(
                "attention-only induction heads "
                + (f"on the {row['label']}" if task else f"at {row['repeat_share']:.0%} repeated windows"),
                {"score": score, "threshold": study["threshold"], "control": formed_control},
                note=f"best head's {row.get('score', 'textbook')} score at step {row['steps']} "
                f"{score.show(signed=False)} over "
                f"{len(row['seeds'])} seeds (threshold {study['threshold']}; first above it at step: {first})",
            )
        )
    return Measured(parts, numbers, ev.path(claim.sources["study_figure"]))


def beam(ev: Evidence, claim: Claim, cfg: FindingsConfig, figures: Path) -> Measured:
    """Each beam's BLEU, and each beam minus greedy (paired bootstrap); the configured beam is the part
    (chosen before the scores, not the best of several after them)."""
    scores = ev.json(claim.sources["eval"])
    beams = sorted(int(m["b"]) for k in scores if (m := re.fullmatch(claim.keys["bleu"], k)))
    main = int(scores[claim.keys["configured"]])
    gain_key = claim.keys["gain"]
    if 1 not in beams or main == 1 or gain_key.format(b=main) not in scores:
        return Measured([])
    gains = {b: Interval.flat(scores, gain_key.format(b=b)) for b in beams if b > 1}
    numbers = [(f"BLEU, beam {b}", f"{scores[claim.keys['bleu_of'].format(b=b)]:.2f}") for b in beams]
    numbers += [
        (f"beam {b} minus greedy (BLEU, 95% paired bootstrap)", d.show(digits=2)) for b, d in gains.items()
    ]
    gain = gains[main]
    words: dict[str, Any] = {"main": main, "gain": gain.show(digits=2)}
    part = Part(f"beam {main}", {"difference": gain}, note=f"{gain.show(digits=2)} BLEU")
    return Measured([part], numbers, ev.path(claim.sources["figure"]), words)
