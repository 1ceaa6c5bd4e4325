"""One figure per headline: the README and the problem pages quote the headline figures
recorded in docs/figures.json (written by `python -m edgewise.devtools.figures` from a
bench's JSON), so that no two pages can disagree."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from edgewise.devtools.figures import HEADLINES, record, written

ROOT = Path(__file__).parents[1]
FIGURES = json.loads((ROOT / "docs" / "figures.json").read_text())
QUOTES = [(bench, key, fig["text"], page) for bench, entry in FIGURES.items()
          for key, fig in entry["figures"].items() for page in fig["pages"]]


def _standalone(text: str) -> re.Pattern[str]:
    """``text`` not inside a longer number (1.21 is not in 1.2126 or 31.21)."""
    return re.compile(r"(?<![\d.])" + re.escape(text) + r"(?![\d])")


@pytest.mark.parametrize(("bench", "key", "text", "page"), QUOTES,
                         ids=[f"{b}.{k}@{p}" for b, k, _, p in QUOTES])
def test_each_page_quotes_the_recorded_figure(bench: str, key: str, text: str,
                                              page: str) -> None:
    assert _standalone(text).search((ROOT / page).read_text()), \
        f"{page} does not quote {bench}.{key} = {text} (docs/figures.json)"


def test_the_readme_states_each_headline_once() -> None:
    readme = (ROOT / "README.md").read_text()
    for bench, key, text, page in QUOTES:
        if page == "README.md":
            assert len(_standalone(text).findall(readme)) == 1, f"{bench}.{key} = {text}"


def test_every_recorded_bench_has_its_headlines() -> None:
    for bench, entry in FIGURES.items():
        assert {h.key for h in HEADLINES[bench]} == set(entry["figures"])
        for h in HEADLINES[bench]:
            fig = entry["figures"][h.key]
            assert fig["text"] == written(fig["value"], h.fmt)


def test_record_writes_a_bench_beside_the_others(tmp_path: Path) -> None:
    path = tmp_path / "figures.json"
    path.write_text(json.dumps({"other": {"figures": {}}}))
    bench_json = {"speedup_mean": 1.2126, "speedup_perfect_model_mean": 1.3107,
                  "speedup_over_1_5_fraction": 0.15, "unrelated": 3}

    record("deep-edge", bench_json, path, seconds=147.2)

    saved = json.loads(path.read_text())
    assert set(saved) == {"other", "deep-edge"} and saved["deep-edge"]["seconds"] == 147
    texts = {k: f["text"] for k, f in saved["deep-edge"]["figures"].items()}
    assert texts == {"speedup_mean": "1.21", "speedup_perfect_model_mean": "1.31",
                     "speedup_over_1_5_fraction": "15 %"}


def test_record_refuses_figures_without_the_headlines(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="lack speedup_perfect_model_mean"):
        record("deep-edge", {"speedup_mean": 1.2, "speedup_over_1_5_fraction": 0.1},
               tmp_path / "f.json")
