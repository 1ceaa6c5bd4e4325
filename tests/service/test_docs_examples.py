"""Every shell example of docs/manager-api.md runs against a running manager (the example
cluster, as `edgewise serve` starts it) and succeeds; the Python example builds an app."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from managerproc import ManagerProcess

pytestmark = [pytest.mark.ray, pytest.mark.system]
DOC = Path(__file__).parents[2] / "docs" / "manager-api.md"
BASE = "http://127.0.0.1:8765"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def _runnable() -> list[str]:
    return [b for b in _blocks("sh") if "# not run" not in b]


def test_the_doc_has_runnable_examples_of_every_part() -> None:
    text = "\n".join(_runnable())
    for path in ("/api/v1/jobs", "/plan", "/events", "/metrics", "/pipelines/", "/infer",
                 "/switch", "/update/solve", "/pipeline/plan", "/continual/plan",
                 "/sites/simulate", "/modelparallel/place", "/faults", "/devices/metrics"):
        assert path in text, path


@pytest.mark.timeout(300)
@pytest.mark.parametrize("index", range(len(_runnable())))
def test_each_shell_example_runs(manager: ManagerProcess, tmp_path: Path, index: int) -> None:
    script = _runnable()[index].replace(BASE, manager.url)
    env = {**os.environ, "TOKEN": manager.token, "H": f"Authorization: Bearer {manager.token}"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{script}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"


def test_the_python_example_builds_a_dry_run_app(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from edgewise.cluster.examples import example_path

    (code,) = _blocks("python")
    monkeypatch.chdir(tmp_path)
    names: dict[str, object] = {}
    exec(code.replace('"cluster.yaml"', repr(str(example_path("deep-edge-testbed.yaml")))),
         names)
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    app = names["app"]
    assert (tmp_path / "manager.db").exists() and isinstance(app, FastAPI)
    with TestClient(app) as client:  # the app it built answers with its token, only with it
        token = {"Authorization": "Bearer a-token"}
        assert client.get("/api/v1/health", headers=token).status_code == 200
        assert client.get("/api/v1/jobs", headers={"Authorization": "Bearer x"}).status_code == 401
