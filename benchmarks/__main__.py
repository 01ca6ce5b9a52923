"""``python -m benchmarks``: run the benchmarks and write ``benchmarks/results.json``.

    python -m benchmarks                       # everything (about 20 minutes on 2 cores)
    python -m benchmarks --only attention,bleu # some groups; the others keep their old results
    python -m benchmarks --quick --out x.json  # tiny sizes: proves the code runs, judges nothing
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

from benchmarks import book, library
from benchmarks.book import ROOT

GROUPS = {
    "attention": library.attention,
    "recurrent": library.recurrent,
    "optimisers": library.optimisers,
    "bleu": library.bleu,
    "rouge": library.rouge,
    "beam_search": library.beam_search,
    "word2vec": library.word2vec,
    "signatures": library.signatures,
    "chapters": book.chapters,
    "book": book.book,
}
DEFAULT_OUT = ROOT / "benchmarks" / "results.json"


def machine() -> dict:
    """What the numbers were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import gensim
    import numpy

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "gensim": gensim.__version__,
        "system": f"{platform.system()} {platform.release()}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help=f"comma-separated groups among: {', '.join(GROUPS)}")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check that everything runs")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results file (default: %(default)s)")
    args = parser.parse_args(argv)
    names = list(GROUPS) if not args.only else [name.strip() for name in args.only.split(",")]
    unknown = [name for name in names if name not in GROUPS]
    if unknown:
        parser.error(f"unknown groups {unknown}; expected some of {list(GROUPS)}")

    # Re-running some groups keeps the others' results.
    previous = json.loads(args.out.read_text()) if args.only and args.out.exists() else {"records": [], "groups": {}}
    records = [r for r in previous["records"] if r["run_group"] not in names]
    groups = {name: info for name, info in previous.get("groups", {}).items() if name not in names}
    order = {name: i for i, name in enumerate(GROUPS)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for name in names:
        start = time.perf_counter()
        print(f"[benchmarks] {name} ...", file=sys.stderr, flush=True)
        for record in GROUPS[name](quick=args.quick):
            records.append({"run_group": name, **record.to_dict()})
        groups[name] = {"seconds": round(time.perf_counter() - start, 1),
                        "date": datetime.date.today().isoformat(), "machine": machine(), "quick": args.quick}
        # Saved after every group, so a long run that fails late keeps what it measured.
        records.sort(key=lambda r: order[r["run_group"]])
        args.out.write_text(json.dumps({"groups": groups, "records": records}, indent=1) + "\n")
    missed = [r for r in records if r["met"] is False]
    print(f"[benchmarks] {len(records)} results written to {args.out}; {len(missed)} goals missed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
