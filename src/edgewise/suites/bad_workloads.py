"""A fixed list of bad workloads (issue 16's errors), each given to ``edgewise update plan
--workload``: every one must exit 2 with one line naming the field, and no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["BAD_WORKLOADS", "bad_inputs_rejected"]

_MODEL = ("from torch import nn\n\ndef make(classes=4):\n"
          "    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, classes))\n")


def _images(root: Path) -> None:
    from edgewise.nn.workload.synthetic import make_shapes_folder

    make_shapes_folder(root / "shapes", per_class=6)
    (root / "model.py").write_text(_MODEL)


def _corrupt(root: Path) -> None:
    next((root / "shapes").glob("*/*.png")).write_bytes(b"not a png")


def _empty_class(root: Path) -> None:
    (root / "shapes" / "zz-empty").mkdir()


def _npz_without_y(root: Path) -> None:
    import numpy as np

    np.savez(root / "bad.npz", x=np.zeros((4, 3, 32, 32), np.float32))


def _weights(root: Path) -> None:
    import torch
    from safetensors.torch import save_file

    save_file({"0.weight": torch.zeros(2, 2)}, str(root / "w.safetensors"))


_SHAPE = "task: {input_shape: [3, 32, 32]}\n"
Case = tuple[str, str, Callable[[Path], None] | None, str]
BAD_WORKLOADS: tuple[Case, ...] = (
    ("hub name", "model: hf:google/mobilenet_v2_1.0_224\n", None, "model"),
    ("bare hub id", "model: microsoft/resnet-50\n", None, "model"),
    ("unknown config class", "model: hf:NoSuchConfig\ndata: images:shapes\n" + _SHAPE,
     None, "model"),
    ("missing model file", "model: py:nope.py:make\ndata: images:shapes\n" + _SHAPE,
     None, "model"),
    ("missing factory", "model: py:model.py:nothing\ndata: images:shapes\n" + _SHAPE,
     None, "model"),
    ("missing data folder", "model: py:model.py:make\ndata: images:nowhere\n", None, "data"),
    ("missing npz", "model: py:model.py:make\ndata: npz:nowhere.npz\n", None, "data"),
    ("npz without y", "model: py:model.py:make\ndata: npz:bad.npz\n", _npz_without_y, "y"),
    ("empty class folder", "model: py:model.py:make\ndata: images:shapes\n" + _SHAPE,
     _empty_class, "zz-empty"),
    ("corrupt image", "model: py:model.py:make\ndata: images:shapes\n" + _SHAPE, _corrupt, ".png"),
    ("classes disagree", "model: py:model.py:make\ndata: images:shapes\n"
                         "task: {input_shape: [3, 32, 32], classes: 7}\n", None, "classes"),
    ("weights that do not fit", "model: py:model.py:make\nweights: w.safetensors\n"
                                "data: images:shapes\n" + _SHAPE, _weights, "weights"),
    ("unknown key", "model: py:model.py:make\ndata: images:shapes\nmodle: x\n", None, "modle"),
)


def _one(case: Case) -> dict[str, Any]:
    name, text, prepare, says = case
    with tempfile.TemporaryDirectory(prefix="edgewise-bad-") as tmp:
        root = Path(tmp)
        _images(root)
        if prepare is not None:
            prepare(root)
        (root / "w.yaml").write_text(text)
        from edgewise.cluster.examples import example_path

        result = subprocess.run(  # the command as a user runs it (no import of the CLI here)
            [sys.executable, "-m", "edgewise", "update", "plan",
             str(example_path("deep-edge-testbed.yaml")), "--workload", str(root / "w.yaml")],
            capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "400"})
    lines = [ln for ln in result.stderr.strip().splitlines() if ln.strip()]
    ok = (result.returncode == 2 and len(lines) == 1 and says in lines[0]
          and "Traceback" not in result.stdout + result.stderr)
    return {"case": name, "ok": ok, "exit": result.returncode, "said": " ".join(lines)[:300]}


def bad_inputs_rejected() -> dict[str, Any]:
    """``bad_inputs_rejected``: 1 if every case is refused as it must be; the cases."""
    found = [_one(case) for case in BAD_WORKLOADS]
    return {"bad_inputs_rejected": int(all(c["ok"] for c in found)),
            "bad_inputs_cases": found}
