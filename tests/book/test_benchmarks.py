"""Tests of the benchmark machinery (not of its numbers: speed is measured by `make bench`).

A quick run proves that every library benchmark still runs and checks its two
sides agree; the committed results file must cover every group the book's
Benchmarks page renders.
"""

import json

import pytest

from benchmarks import __main__ as cli
from benchmarks.report import DEFAULT_RESULTS, load, missed_goals, ratio_figure, table
from benchmarks.timing import compare, measured

LIBRARY_GROUPS = ["attention", "recurrent", "optimisers", "bleu", "rouge", "beam_search", "word2vec"]


def test_compare_puts_the_slower_side_above_one():
    slow = compare("g", "c", lambda: sum(range(20_000)), lambda: None, "nothing", goal="<= 1.5",
                   repeats=3, min_seconds=0.01)
    assert slow.ratio > 1.5 and slow.met is False
    fast = compare("g", "c", lambda: None, lambda: sum(range(20_000)), "work", goal=">= 2", speedup=True,
                   repeats=3, min_seconds=0.01)
    assert fast.ratio > 2 and fast.met is True  # a speed-up: reference / ours
    assert measured("g", "c", 42.0, "s", goal="< 60").met is True


def test_a_quick_run_of_every_library_benchmark(tmp_path):
    out = tmp_path / "results.json"
    assert cli.main(["--quick", "--only", ",".join(LIBRARY_GROUPS), "--out", str(out)]) == 0
    results = load(out)
    groups = {r["run_group"] for r in results["records"]}
    assert groups == set(LIBRARY_GROUPS)
    for record in results["records"]:
        assert record["ratio"] is None or record["ratio"] > 0
    for group in {r["group"] for r in results["records"]}:
        assert table(results, group).count("\n") >= 2
    assert table(results, "chapters").startswith("*Not measured yet")
    # One bar per ratio, on a log axis.
    bars = ratio_figure(results).axes[0].patches
    assert len(bars) == sum(r["ratio"] is not None for r in results["records"])
    # Re-running one group keeps the others.
    assert cli.main(["--quick", "--only", "bleu", "--out", str(out)]) == 0
    assert {r["run_group"] for r in load(out)["records"]} == groups


def test_unknown_groups_are_refused(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--only", "attention,nope"])
    assert "unknown groups ['nope']" in capsys.readouterr().err


def test_the_committed_results_cover_every_group_of_the_page():
    results = load(DEFAULT_RESULTS)
    assert set(results["groups"]) == set(cli.GROUPS)
    assert not any(info["quick"] for info in results["groups"].values())
    page = json.loads((DEFAULT_RESULTS.parent.parent / "backmatter" / "benchmarks.ipynb").read_text())
    shown = {line.split('"')[1] for cell in page["cells"] for line in "".join(cell["source"]).splitlines()
             if line.startswith("Markdown(table(results, ")}
    assert shown == {r["group"] for r in results["records"]}
    assert isinstance(missed_goals(results), list)
