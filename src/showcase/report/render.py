"""Write report.html for one run and a comparison page for several, from Jinja2 templates.

Pages are self-contained: styles, scripts and charts are inline (SVG drawn here), and the only
other files they use are the run's own screenshot.png, clip.mp4 and versions/, linked by
relative paths. A Content-Security-Policy keeps the page from ever reaching the network.
"""

from __future__ import annotations

import functools
import os
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from showcase import __version__
from showcase.check.rubric import load_rubric
from showcase.errors import InfraError, UserError
from showcase.io import write_text_atomic
from showcase.report.load import RunView, flatten, fmt_value, load_run, looks_like_run
from showcase.report.play import Play, write_play
from showcase.report.rating import rating_path
from showcase.runfolder.artefacts import RunLayout
from showcase.visible import visible

REPORT_NAME = "report.html"


def _shown(value):
    """Every value a template prints, before it is escaped: control characters visible, lines kept.

    Text from the page, the agent or the upstream must reach no reader raw (a terminal showing the
    file acts on ESC); the report's own HTML (Markup: the charts drawn here) keeps its markup."""
    if isinstance(value, Markup):
        return Markup(visible(str(value), keep_lines=True))
    if isinstance(value, str):
        return visible(value, keep_lines=True)
    return value


@functools.lru_cache(maxsize=1)
def _env() -> Environment:
    """One environment per process: templates compile once."""
    env = Environment(
        loader=PackageLoader("showcase.report", "templates"),
        # Titles, page text and error lines come from the agent's page: never trust them.
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_shown,
    )
    env.filters["value"] = fmt_value
    env.filters["minutes"] = lambda s: "not recorded" if s is None else f"{s / 60:.1f} min"
    env.filters["num"] = lambda v, nd=0: "not recorded" if v is None else (f"{v:,.{nd}f}" if nd else f"{int(v):,}")
    env.filters["kib"] = lambda b: "?" if b is None else (f"{b / 1024:.1f} KiB" if b >= 1024 else f"{b} B")
    env.filters["flatten"] = flatten
    env.filters["words"] = lambda key: key.replace("_", " ").replace(".", ", ")
    return env


def _href(target: Path, page_dir: Path) -> str:
    """Relative, URL-quoted link from a page in page_dir to target."""
    rel = os.path.relpath(target.resolve(), page_dir.resolve())
    return quote(Path(rel).as_posix())


def _check_run_dir(run_dir: Path) -> Path:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: no such run folder")
    if not looks_like_run(run_dir):
        raise UserError(f"{run_dir}: not a run folder (none of command.txt, contract.json, run-info.json, versions.jsonl, check.json is there)")
    return run_dir


def _resolve_out(out: Path | None, default: Path) -> Path:
    if out is None:
        return default
    out = Path(out)
    if out.is_dir():
        return out / REPORT_NAME
    if out.suffix.lower() not in (".html", ".htm"):
        raise UserError(f"{out}: the report is an .html file (or name an existing folder)")
    return out


# ---- charts (inline SVG, no scripts) ---------------------------------------------------------

def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    import math

    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * exp:
            return m * exp
    return 10 * exp


def _short(v: float) -> str:
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


def _marks(run: RunView) -> list[tuple[float, str, str]]:
    """(seconds, label, css class) of the moments every chart shows."""
    marks = []
    if run.finish_now_s is not None:
        marks.append((run.finish_now_s, "finish-now", "mark-finish"))
    elif run.finish_now_from_s is not None:
        marks.append((run.finish_now_from_s, "finish-now due", "mark-due"))
    if run.hard_stop_s is not None:
        marks.append((run.hard_stop_s, "hard stop", "mark-stop"))
    elif run.limit_s is not None:
        marks.append((run.limit_s, "hard stop due", "mark-due"))
    if run.ended_s is not None:
        marks.append((run.ended_s, "agent ended", "mark-end"))
    return marks


def _span_s(run: RunView) -> float:
    ts = [m[0] for m in _marks(run)]
    ts += [v.t_s for v in run.versions if v.t_s is not None]
    ts += [p.t_s for p in run.token_points]
    ts += [e.t_s for e in run.events]
    if run.minutes is not None:
        ts.append(run.minutes * 60)
    return max(ts + [60.0])


W, PAD_L, PAD_R = 900, 64, 16


def _x(t: float, span: float) -> float:
    return PAD_L + (W - PAD_L - PAD_R) * max(0.0, t) / span


def _time_axis(span: float, y: float) -> str:
    step_min = _nice_max(span / 60 / 8)
    parts, m = [], 0.0
    while m * 60 <= span + 1e-9:
        x = _x(m * 60, span)
        parts.append(f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x:.1f}" y2="{y + 4:.1f}" class="axis"/>')
        parts.append(f'<text x="{x:.1f}" y="{y + 16:.1f}" class="tick" text-anchor="middle">{m:g}</text>')
        m += step_min
    parts.append(f'<text x="{W - PAD_R:.1f}" y="{y + 30:.1f}" class="tick" text-anchor="end">minutes since start</text>')
    return "".join(parts)


def _mark_lines(run: RunView, span: float, top: float, bottom: float) -> str:
    out = []
    last_x_on_row: list[float] = []
    for t, label, cls in sorted(_marks(run)):
        x = _x(t, span)
        # Labels of close moments go on separate rows; near the right edge they hang to the left.
        row = next((i for i, lx in enumerate(last_x_on_row) if x - lx > 95), len(last_x_on_row))
        if row == len(last_x_on_row):
            last_x_on_row.append(x)
        else:
            last_x_on_row[row] = x
        right = x > W - PAD_R - 95
        tx, anchor = (x - 3, "end") if right else (x + 3, "start")
        out.append(
            f'<line x1="{x:.1f}" y1="{top:.1f}" x2="{x:.1f}" y2="{bottom:.1f}" class="{cls}"><title>{escape(label)} at {t / 60:.1f} min</title></line>'
            f'<text x="{tx:.1f}" y="{top + 10 + 11 * row:.1f}" text-anchor="{anchor}" class="marklabel {cls}">{escape(label)}</text>'
        )
    return "".join(out)


def token_chart(run: RunView) -> Markup | None:
    """Cumulative requests, prompt and answer tokens over time, one panel each (their scales differ ~100x)."""
    pts = run.token_points
    if not pts:
        return None
    span = _span_s(run)
    panel_h, gap = 100, 36
    panels = (("requests to the model", "n", "line-requests"), ("prompt tokens", "prompt", "line-prompt"),
              ("answer tokens", "answer", "line-answer"))
    svg = [f'<svg class="chart" viewBox="0 0 {W} {len(panels) * (panel_h + gap) + 16}" role="img" aria-label="tokens over time">']
    for i, (label, key, cls) in enumerate(panels):
        top = 10 + i * (panel_h + gap)
        bottom = top + panel_h
        vmax = _nice_max(max(getattr(p, key) for p in pts))
        svg.append(f'<text x="{PAD_L}" y="{top - 1:.1f}" class="paneltitle">{label} (cumulative)</text>')
        for frac in (0, 0.5, 1):
            y = bottom - frac * panel_h
            svg.append(f'<line x1="{PAD_L}" y1="{y:.1f}" x2="{W - PAD_R}" y2="{y:.1f}" class="grid"/>')
            svg.append(f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{_short(vmax * frac)}</text>')
        path = [f"M{_x(0, span):.1f},{bottom:.1f}"]
        prev_y = bottom
        for p in pts:
            x = _x(p.t_s, span)
            y = bottom - panel_h * getattr(p, key) / vmax
            path.append(f"L{x:.1f},{prev_y:.1f}L{x:.1f},{y:.1f}")  # steps: tokens arrive per request
            prev_y = y
        svg.append(f'<path d="{"".join(path)}" class="{cls}"/>')
        svg.append(_mark_lines(run, span, top, bottom))
    svg.append(_time_axis(span, 10 + len(panels) * panel_h + (len(panels) - 1) * gap))
    svg.append("</svg>")
    return Markup("".join(svg))


def timeline_chart(run: RunView) -> Markup | None:
    """Every version as a dot on the run's time axis (green loaded, red not), with the moments."""
    if not run.versions and not run.events:
        return None
    span = _span_s(run)
    top, bottom = 18, 70
    svg = [f'<svg class="chart" viewBox="0 0 {W} {bottom + 40}" role="img" aria-label="timeline of versions">']
    svg.append(f'<line x1="{PAD_L}" y1="{(top + bottom) / 2}" x2="{W - PAD_R}" y2="{(top + bottom) / 2}" class="axis"/>')
    svg.append(f'<text x="{PAD_L - 6}" y="{(top + bottom) / 2 + 4}" class="tick" text-anchor="end">versions</text>')
    svg.append(_mark_lines(run, span, top - 12, bottom))
    for v in run.versions:
        if v.t_s is None:
            continue
        cls = "v-ok" if v.loaded else ("v-bad" if v.loaded is False else "v-unknown")
        r = 7 if v.chosen else 5
        state = "loaded without errors" if v.loaded else ("did not load cleanly" if v.loaded is False else "load not checked")
        svg.append(
            f'<a href="#v{v.n}"><circle cx="{_x(v.t_s, span):.1f}" cy="{(top + bottom) / 2}" r="{r}" class="{cls}{" v-chosen" if v.chosen else ""}">'
            f"<title>version {v.n} at {v.t_s / 60:.1f} min: {state}{' (counts)' if v.chosen else ''}</title></circle></a>"
        )
    svg.append(_time_axis(span, bottom + 4))
    svg.append("</svg>")
    return Markup("".join(svg))


# ---- pages -----------------------------------------------------------------------------------

def _now() -> str:
    return datetime.now(timezone.utc).astimezone().strftime("%Y-%m-%d %H:%M %Z")


def _assets(run: RunView, page_dir: Path) -> dict:
    layout = RunLayout(run.dir)

    def link(rel: str | None) -> str | None:
        return _href(run.dir / rel, page_dir) if rel else None

    return {
        "screenshot": link(run.screenshot),
        "clip": link(run.clip),
        "versions": {v.n: {"file": link(v.file), "thumb": link(v.thumb)} for v in run.versions},
        "shots": [link(s.path) for s in run.agent_shots],
        "raw": {
            path.relative_to(run.dir).as_posix(): _href(path, page_dir)
            for path in (
                layout.command, layout.contract, layout.sampling, layout.run_info, layout.gate_stats, layout.gate_log,
                layout.versions_log, layout.final_choice, layout.check, layout.events_log, layout.screenshot,
                layout.clip, layout.clip_info, rating_path(run.dir), layout.task_dir / "prompt.txt", layout.agent_log,
            )
            if path.is_file() and not path.is_symlink()
        },
    }


def render_run(run: RunView, out: Path, play: Play | None = None, play_note: str | None = None) -> str:
    a = _assets(run, out.parent)
    a["play"] = _href(play.page, out.parent) if play else None
    return _env().get_template("run.html.j2").render(
        run=run,
        a=a,
        play=play,
        play_note=play_note,
        timeline=timeline_chart(run),
        tokens=token_chart(run),
        generated=_now(),
        version=__version__,
    )


def write_run_report(run_dir: Path, out: Path | None = None) -> Path:
    """Write the report of one run (default RUN_DIR/report.html) and return its path."""
    run_dir = _check_run_dir(Path(run_dir))
    out = _resolve_out(out, run_dir / REPORT_NAME)
    run = load_run(run_dir)
    play, note = make_play(run, out)
    write_text_atomic(out, render_run(run, out, play, note))
    return out


def make_play(run: RunView, out: Path) -> tuple[Play | None, str | None]:
    """The chosen page's playable copy beside the report (OUT-play/game.html), or why there is none."""
    chosen = run.chosen
    if chosen is None or chosen.file is None:
        return None, "no version was chosen, so there is nothing to play"
    from showcase.task import DEFAULT_TASK, load_task

    try:
        task = load_task(run.task or DEFAULT_TASK)
    except Exception:  # an unknown task id in a foreign folder: the page's own import map, if any, still works
        task = None
    try:
        return write_play(run.dir / chosen.file, out.parent / f"{out.stem}-play", task), None
    except (InfraError, OSError) as exc:
        return None, f"the live page could not be prepared: {exc}"


def _unique_labels(dirs: list[Path]) -> list[str]:
    """Folder names, with as many parent folders as it takes to tell them apart."""
    parts = [Path(os.path.abspath(d)).parts for d in dirs]
    depth = 1
    while depth < max(len(p) for p in parts):
        labels = ["/".join(p[-depth:]) for p in parts]
        if len(set(labels)) == len(labels):
            return labels
        depth += 1
    return ["/".join(p[-depth:]) for p in parts]


# Contract fields that differ between runs on purpose (what is being compared); any other field
# that differs means the runs were not held to the same terms, and the page says so.
COMPARED_ON_PURPOSE = ("model", "harness", "upstream_url", "image", "sampling", "schema_version")


def contract_differences(runs: list[RunView]) -> tuple[list[dict], list[dict]]:
    """(fields that differ on purpose, fields that should not differ), each row {key, values}."""
    flat = [dict(flatten(r.contract)) if r.contract else {} for r in runs]
    keys = sorted({k for f in flat for k in f})
    on_purpose, suspect = [], []
    for key in keys:
        values = [f.get(key, "not recorded") for f in flat]
        if len(set(values)) > 1:
            row = {"key": key, "values": values}
            (on_purpose if key.split(".")[0].split("[")[0] in COMPARED_ON_PURPOSE else suspect).append(row)
    return on_purpose, suspect


def write_comparison(run_dirs: list[Path], out: Path) -> Path:
    """Write one page comparing several runs, with each run's own report.html refreshed beside it."""
    if not run_dirs:
        raise UserError("no run folders to compare")
    dirs = [_check_run_dir(Path(d)) for d in run_dirs]
    out = _resolve_out(out, Path("comparison.html"))
    rows = []
    for d, label in zip(dirs, _unique_labels(dirs)):
        run = load_run(d)
        report = d / REPORT_NAME
        try:
            play, note = make_play(run, report)
            write_text_atomic(report, render_run(run, report, play, note))
        except OSError:
            pass  # a read-only run folder keeps whatever report it has
        run.label = label  # after its own page is written: that one keeps the plain folder name
        a = _assets(run, out.parent)
        a["report"] = _href(report, out.parent) if report.is_file() else None
        rows.append({"run": run, "a": a})
    on_purpose, suspect = contract_differences([r["run"] for r in rows])
    # Scores of different rubric versions are not comparable: the most common version is the
    # page's, every other one is marked on its row.
    versions = [r["run"].rubric_version for r in rows if r["run"].rubric_version]
    main_rubric = max(set(versions), key=versions.count) if versions else None
    text = _env().get_template("compare.html.j2").render(
        rows=rows, on_purpose=on_purpose, suspect=suspect, generated=_now(), version=__version__,
        rubric=load_rubric(), main_rubric=main_rubric,
        mixed_rubrics=len(set(versions)) > 1,
    )
    write_text_atomic(out, text)
    return out
