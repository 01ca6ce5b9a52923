"""Render ``benchmarks/results.json`` for the book's Benchmarks page (nothing is re-run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from matplotlib.figure import Figure

from benchmarks.book import ROOT

__all__ = ["load", "machine_summary", "table", "ratio_figure", "missed_goals", "load_site_weight",
           "site_weight_tables"]

DEFAULT_RESULTS = ROOT / "benchmarks" / "results.json"
DEFAULT_SITE_WEIGHT = ROOT / "benchmarks" / "site_weight.json"
GROUP_TITLES = {
    "attention": "Attention",
    "recurrent": "Recurrent layers",
    "optimisers": "Optimisers",
    "metrics": "BLEU and ROUGE",
    "decoding": "Beam search",
    "word2vec": "word2vec",
    "chapters": "Chapter execution",
    "explorers": "Explorer updates",
    "book": "The whole book",
}


def _read(path: Optional[Path], default: Path, how: str) -> dict:
    path = default if path is None else Path(path)
    if not path.is_file():
        raise ValueError(f"no {default.stem.replace('_', ' ')} at {path}; {how}")
    return json.loads(path.read_text(encoding="utf-8"))


def load(path: Optional[Path] = None) -> dict:
    """The results written by ``python -m benchmarks``."""
    return _read(path, DEFAULT_RESULTS, "run `make bench` first")


def machine_summary(results: dict) -> str:
    """One Markdown line per distinct machine and date the results come from."""
    lines = set()
    for info in results["groups"].values():
        m = info["machine"]
        lines.add(f"{info['date']}: {m['cpu']}, {m['cores']} cores ({m['torch_threads']} torch threads), "
                  f"{m['system']}, Python {m['python']}, torch {m['torch']}, numpy {m['numpy']}, gensim {m['gensim']}"
                  + (" — **quick run, sizes shrunk**" if info["quick"] else ""))
    return "\n".join(f"- {line}" for line in sorted(lines))


def _duration(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _timing(timing: Optional[dict]) -> str:
    if not timing:
        return ""
    return f"{_duration(timing['median'])} ({_duration(timing['low'])}–{_duration(timing['high'])})"


def _verdict(record: dict) -> str:
    return {True: "✓", False: "✗ missed", None: ""}[record["met"]]


def table(results: dict, group: str) -> str:
    """A Markdown table of one group's records."""
    records = [r for r in results["records"] if r["group"] == group]
    if not records:
        # The build of the book inside the `book` benchmark renders this page before that group has results.
        return f"*Not measured yet: run `python -m benchmarks` (the group that measures {group!r}).*"
    if records[0]["reference"] is not None:
        lines = ["| case | ours: median (min–max) | reference | reference: median (min–max) | ratio | goal | |",
                 "|---|---|---|---|---|---|---|"]
        for r in records:
            note = f" ({r['note']})" if r["note"] else ""
            lines.append(f"| {r['case']}{note} | {_timing(r['ours'])} | {r['reference_name']} | "
                         f"{_timing(r['reference'])} | {r['ratio']:.2f} | {r['goal']} | {_verdict(r)} |")
    else:
        lines = ["| case | measured | goal | | note |", "|---|---|---|---|---|"]
        for r in records:
            lines.append(f"| {r['case']} | {r['value']:.3g} {r['unit']} | {r['goal']} | {_verdict(r)} | {r['note']} |")
    return "\n".join(lines)


def missed_goals(results: dict) -> list[str]:
    """The cases whose goal was missed."""
    return [f"{r['group']}: {r['case']}" for r in results["records"] if r["met"] is False]


def ratio_figure(results: dict) -> Figure:
    """Every ours / reference ratio on one log axis, with each case's goal marked."""
    records = [r for r in results["records"] if r["ratio"] is not None]
    fig = Figure(figsize=(10, 0.28 * len(records) + 1.2), layout="constrained")
    ax = fig.add_subplot()
    labels = [f"{r['group']}: {r['case']}" for r in records]
    colors = ["tab:red" if r["met"] is False else "tab:green" if r["met"] else "tab:gray" for r in records]
    positions = range(len(records))
    ax.barh(positions, [r["ratio"] for r in records], color=colors)
    for y, r in zip(positions, records):
        if r["goal"]:
            ax.plot([float(r["goal"].split()[1])] * 2, [y - 0.4, y + 0.4], color="black", lw=1.5)
    ax.axvline(1.0, color="black", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_yticks(list(positions), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time ours / reference: lower is better (beam search: speed-up, higher is better)")
    ax.set_title("green: goal met · red: missed · grey: no goal · black tick: the goal", fontsize=9)
    return fig


def load_site_weight(path: Optional[Path] = None) -> dict:
    """The sizes written by ``python -m benchmarks.site_weight`` after a build."""
    return _read(path, DEFAULT_SITE_WEIGHT, "build the book, then run `python -m benchmarks.site_weight`")


# A chapter whose first load is under the goal by less than this is named as a near miss.
NEAR_MISS_KB = 15


def _mb(size: float) -> str:
    return f"{size / 1e6:.2f} MB"


def site_weight_tables(weight: dict) -> str:
    """Markdown: the site's size by part, each chapter's first load and where it goes, then what each
    chapter page transfers when read to its end and when it is ready."""
    goals, sizes = weight["goals"], weight["sizes"]
    site_met = sizes["site"] <= goals["site_mb"] * 1e6
    lines = [f"Measured {weight['date']}.", "", "| part of the site | size | goal | |", "|---|---|---|---|",
             f"| whole site | {_mb(sizes['site'])} | ≤ {goals['site_mb']:g} MB | {_verdict({'met': site_met})} |"]
    lines += [f"| {part} | {_mb(size)} | | |" for part, size in sizes.items() if part != "site"]
    if "first_load_mb" in goals:
        kinds = ["page (HTML)", "MathJax", "style sheets", "scripts", "fonts", "images", "search index"]
        lines += ["", "First load: what a fresh visit fetches in a 1366×900 window that is not scrolled, until the "
                  "page has loaded and no request has started for 0.5 s (images and maths fonts in view included); "
                  f"goal: at most {goals['first_load_mb']:g} MB ({goals['first_load_mb'] * 1e3:,.0f} KB) uncompressed. Where it goes, uncompressed:", "",
                  "| chapter page | first load | gzip | requests | " + " | ".join(kinds) + " | goal |",
                  "|---" * (len(kinds) + 5) + "|"]
        for page, t in weight["pages"].items():
            first = t["first_load"]
            parts = [f"{first['by_kind'][kind]['bytes'] / 1e3:.0f} KB" if kind in first["by_kind"] else "–"
                     for kind in kinds]
            margin = goals["first_load_mb"] * 1e3 - first["bytes"] / 1e3
            verdict = f"✓ {margin:,.0f} KB under" if margin >= 0 else f"✗ {-margin:,.0f} KB over"
            lines.append(f"| {page} | {first['bytes'] / 1e3:,.0f} KB | {_mb(first['gzip_bytes'])} | {first['requests']} | "
                         + " | ".join(parts) + f" | {verdict} |")
        near = [(page, goals["first_load_mb"] * 1e3 - t["first_load"]["bytes"] / 1e3) for page, t in weight["pages"].items()]
        near = [(page, margin) for page, margin in near if 0 <= margin < NEAR_MISS_KB]
        if near:
            lines += ["", f"Met by less than {NEAR_MISS_KB} KB (a few more paragraphs or a figure in view would cross "
                      "the goal): " + ", ".join(f"{page} ({margin:,.0f} KB under)" for page, margin in near) + "."]
    lines += ["", "The whole page, scrolled to its end (lazily loaded images included). "
              f"Goals for a chapter page: at most {goals['chapter_page_mb']:g} MB transferred, and its first "
              f"explorer answering a moved control within {goals['first_explorer_s']:g} s.", "",
              "| chapter page | transferred | gzip | requests | DOM ready | loaded | maths typeset "
              "| first explorer | goals |", "|---|---|---|---|---|---|---|---|---|"]
    for page, t in weight["pages"].items():
        explorer_ms = t.get("first_explorer_ms")
        missed = [f"over {goals['chapter_page_mb']:g} MB"] * (t["bytes"] > goals["chapter_page_mb"] * 1e6)
        if explorer_ms is not None and explorer_ms > goals["first_explorer_s"] * 1e3:
            missed.append(f"explorer after {goals['first_explorer_s']:g} s")
        explorer = "no explorer" if explorer_ms is None else f"{explorer_ms / 1e3:.2f} s"
        lines.append(f"| {page} | {_mb(t['bytes'])} | {_mb(t['gzip_bytes'])} | {t['requests']} | "
                     f"{t['dom_content_loaded_ms'] / 1e3:.2f} s | {t['load_ms'] / 1e3:.2f} s | "
                     f"{t['typeset_ms'] / 1e3:.2f} s | {explorer} | "
                     f"{'✗ ' + ', '.join(missed) if missed else '✓'} |")
    return "\n".join(lines)
