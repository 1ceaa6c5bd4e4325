"""`python -m edgewise.devtools.figures BENCH JSON [--seconds S] [--note TEXT]`: record a
benchmark's headline figures in ``docs/figures.json``, the one place the README and the
problem pages quote them from (a test checks that each page quotes each figure as recorded,
so two pages cannot disagree).

``JSON`` is the one object ``edgewise bench BENCH --json`` printed (``-``: stdin); which of
its keys are headlines, how each is written and which pages quote it is ``HEADLINES``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["HEADLINES", "Headline", "figures_file", "main", "record", "written"]


@dataclass(frozen=True, slots=True)
class Headline:
    """A bench key quoted by pages: how it is written (a format spec) and where."""

    key: str
    fmt: str
    pages: tuple[str, ...]


HEADLINES: dict[str, tuple[Headline, ...]] = {
    "deep-edge": (
        Headline("speedup_mean", ".2f", ("README.md", "docs/deep-edge.md")),
        Headline("speedup_perfect_model_mean", ".2f", ("README.md", "docs/deep-edge.md")),
        Headline("speedup_over_1_5_fraction", ".0%", ("docs/deep-edge.md",)),
    ),
}
"""Per benchmark, its headline figures."""


def written(value: float, fmt: str) -> str:
    """``value`` as the pages write it (``.0%`` gives ``15 %``, with the space the docs
    put before a percent sign)."""
    text = format(value, fmt)
    return text[:-1] + " %" if text.endswith("%") else text


def figures_file() -> Path:
    """``docs/figures.json`` of the checkout holding this module."""
    return Path(__file__).resolve().parents[3] / "docs" / "figures.json"


def record(bench: str, figures: dict[str, Any], path: Path, seconds: float | None = None,
           note: str = "") -> dict[str, Any]:
    """Write ``bench``'s headlines from its JSON ``figures`` into ``path`` (other benches'
    entries kept); the entry written."""
    if bench not in HEADLINES:
        raise SystemExit(f"no headlines for bench {bench!r}; known: {', '.join(HEADLINES)}")
    missing = [h.key for h in HEADLINES[bench] if h.key not in figures]
    if missing:
        raise SystemExit(f"the {bench} figures lack {', '.join(missing)}")
    entry: dict[str, Any] = {
        "command": f"edgewise bench {bench} --json",
        "recorded": datetime.date.today().isoformat(), "note": note,
        "seconds": None if seconds is None else round(seconds),
        "figures": {h.key: {"value": figures[h.key], "text": written(figures[h.key], h.fmt),
                            "pages": list(h.pages)} for h in HEADLINES[bench]}}
    everything = json.loads(path.read_text()) if path.exists() else {}
    everything[bench] = entry
    path.write_text(json.dumps(everything, indent=2, ensure_ascii=False) + "\n")
    return entry


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m edgewise.devtools.figures",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("bench", choices=sorted(HEADLINES))
    parser.add_argument("json", help="the bench's --json output (- for stdin)")
    parser.add_argument("--seconds", type=float, help="the bench's wall-clock seconds")
    parser.add_argument("--note", default="", help="where and how it was measured")
    parser.add_argument("--output", type=Path, default=None, help="default: docs/figures.json")
    args = parser.parse_args(argv)
    text = sys.stdin.read() if args.json == "-" else Path(args.json).read_text()
    entry = record(args.bench, json.loads(text), args.output or figures_file(), args.seconds,
                   args.note)
    for key, fig in entry["figures"].items():
        print(f"{args.bench}.{key} = {fig['text']}  (quoted by {', '.join(fig['pages'])})")


if __name__ == "__main__":
    main()
