"""Every `edgewise ...` command shown in README.md and docs/*.md exists: its command path and
each option it names are checked against the CLI's command tree (Typer's click objects,
duck-typed: Typer vendors its own click), in-process."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer

from edgewise.cli import build_app

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
BLOCK = re.compile(r"^```[a-z]*\n(.*?)^```", re.S | re.M)
CALL = re.compile(r"(?:^|(?<=[\s/]))edgewise(?=\s|$)")
OPTION = re.compile(r"^-{1,2}[a-z][a-z0-9-]*$")


@dataclass(frozen=True)
class Shown:
    """One command as a page shows it: where, and its words after ``edgewise``."""

    page: str
    line: int
    words: tuple[str, ...]


def _spans(text: str) -> list[tuple[int, str]]:
    """(line number, text) of every inline code span and every code block line, a block's
    continuation lines (ending in a backslash) joined and its comments dropped."""
    spans: list[tuple[int, str]] = []
    blocks = [(m.start(), m.group(1)) for m in BLOCK.finditer(text)]
    prose = BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for number, line in enumerate(prose.splitlines(), 1):
        spans += [(number, m.group(1).replace("\\|", "|")) for m in INLINE.finditer(line)]
    for start, body in blocks:
        first = text.count("\n", 0, start) + 2
        joined = re.sub(r"\\\n", " ", body)
        for offset, line in enumerate(joined.splitlines()):
            spans.append((first + offset, re.sub(r"(^|\s)#.*$", "", line)))
    return spans


def _calls(span: str) -> list[tuple[str, ...]]:
    """The words after each ``edgewise`` of a span, up to the next one, a shell operator or
    ``--`` (the words after ``testbed exec N --`` are another command)."""
    calls = []
    starts = [m.end() for m in CALL.finditer(span)]
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(span)
        words = []
        for word in span[start:end].split():
            if word in ("|", "||", "&&", ";", ">", "2>&1", "--") or word.startswith(">"):
                break
            words.append(word)
        calls.append(tuple(words))
    return calls


def shown_commands() -> list[Shown]:
    """Every ``edgewise`` command of README.md and docs/*.md."""
    found = []
    for page in PAGES:
        for line, span in _spans(page.read_text()):
            for words in _calls(span):
                found.append(Shown(page.relative_to(ROOT).as_posix(), line, words))
    return found


def _options(command: Any) -> set[str]:
    names = {"--help"}
    for param in command.params:
        names.update(param.opts)
        names.update(param.secondary_opts)
    return names


def problems(root: Any, words: tuple[str, ...]) -> list[str]:
    """What does not exist of the command ``edgewise WORDS``: a sub-command or an option."""
    command, rest = root, list(words)
    while hasattr(command, "commands") and rest and not rest[0].startswith("-"):
        names = rest[0].strip("[]()").split("|")
        if not all(re.fullmatch(r"[a-z][a-z0-9-]*", n) for n in names):
            break  # a placeholder (COMMAND, ...) or an ellipsis
        found = [command.get_command(None, n) for n in names]
        if None in found:
            missing = names[found.index(None)]
            return [f"no command {' '.join([*words[: len(words) - len(rest)], missing])}"]
        command, rest = found[0], rest[1:]
        if hasattr(command, "real"):  # a benchmark as `bench --help` lists it
            command = command.real()
    known = _options(command)
    bad = []
    for word in rest:
        for flag in re.split(r"[|/]", word.strip("[](),").split("=")[0]):
            if OPTION.match(flag) and flag not in known:
                bad.append(f"no option {flag} of {command.name}")
    return bad


@pytest.fixture(scope="module")
def cli() -> Any:
    return typer.main.get_command(build_app())


def test_the_pages_show_commands() -> None:
    shown = shown_commands()
    pages = {s.page for s in shown}

    assert len(shown) > 150
    assert {"README.md", "docs/cli.md", "docs/testbed.md", "docs/workloads.md"} <= pages


def test_every_command_the_pages_show_exists(cli: Any) -> None:
    failures = [f"{s.page}:{s.line}: edgewise {' '.join(s.words)}: {p}"
                for s in shown_commands() for p in problems(cli, s.words)]

    assert failures == []


@pytest.mark.parametrize(("words", "says"), [
    (("pipeline", "zoo"), "no command pipeline zoo"),
    (("sites", "run", "--scenario", "x.yaml"), "no option --scenario of run"),
    (("fault", "list|kil"), "no command fault kil"),
    (("train", "FILE", "[--mode", "async|sync]", "[--epoch", "N]"), "no option --epoch"),
])
def test_a_command_or_option_that_does_not_exist_is_named(
        cli: Any, words: tuple[str, ...], says: str) -> None:
    assert any(says in p for p in problems(cli, words))


def test_a_shown_command_is_cut_at_shell_operators_and_exec() -> None:
    span = "sudo edgewise testbed exec tb -- edgewise pipeline run --address auto | tee log"

    assert _calls(span) == [("testbed", "exec", "tb"), ("pipeline", "run", "--address", "auto")]


def test_the_docs_run_edgewise_one_way() -> None:
    """The README says how to put edgewise on PATH; the pages then call it ``edgewise``
    (and ``python``), never ``.venv/bin/...``."""
    readme = (ROOT / "README.md").read_text()
    uses = [f"{p.relative_to(ROOT)}:{n}" for p in PAGES[1:]
            for n, line in enumerate(p.read_text().splitlines(), 1) if ".venv/bin/" in line]

    assert "source .venv/bin/activate" in readme and "pip install -e ." in readme
    assert uses == []
