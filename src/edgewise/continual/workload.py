"""Ekya on the user's own models and frames: the student and the golden model from workload
specs (default: the built-in digits CNNs) and frame folders decoded to the student's input."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from edgewise.errors import ConfigError
from edgewise.nn.continual_models import Student, golden_model, pretrained_edge
from edgewise.nn.streams import DIGITS_SHAPE, N_CLASSES, FrameStream, load_frame_folders
from edgewise.nn.students import check_pair, spec_model, spec_student
from edgewise.nn.workload import Workload

__all__ = ["EdgeModels", "edge_models", "frame_streams"]


@dataclass(frozen=True, slots=True, eq=False)
class EdgeModels:
    """The deployed student before any retraining, the golden model that labels the
    retraining frames, the frames' shape (C, H, W) and the classes both output."""

    student: Student
    golden: nn.Module
    shape: tuple[int, ...]
    classes: int


def edge_models(student: Workload | None = None, golden: Workload | None = None,
                seed: int = 0) -> EdgeModels:
    """The student (its weights, else a seeded random initialisation; the built-in digits
    CNN pre-trained on clean digits when ``student`` is None) and the golden model (the
    built-in teacher when ``golden`` is None, which labels only 8×8 grey digits).

    Raises
    ------
    ConfigError
        A model that cannot be built, weights that do not fit, a student whose frames the
        built-in teacher cannot label (field ``golden``), or a pair whose classes differ.
    """
    if student is None:
        model: Student = pretrained_edge(seed)
        shape = DIGITS_SHAPE
    else:
        model = spec_student(student, seed)
        shape = tuple(model.doc["task"]["input_shape"])
    if golden is None:
        if shape != DIGITS_SHAPE:
            raise ConfigError(f"the built-in golden model labels 8x8 grey digits; a student "
                              f"on {list(shape)} frames needs --golden SPEC (with its "
                              "--golden-weights)", field="golden")
        teacher: nn.Module = golden_model(seed)
    else:
        teacher = spec_model(golden, seed, "golden")
    classes = check_pair(model, teacher, shape)
    if student is None and classes != N_CLASSES:
        raise ConfigError(f"the built-in student outputs {N_CLASSES} classes, the golden "
                          f"model {classes}", field="golden")
    return EdgeModels(model, teacher, shape, classes)


def frame_streams(folders: Sequence[Path], models: EdgeModels) -> list[FrameStream]:
    """One stream per folder of window folders, its frames decoded to the student's input
    shape and its labels checked against its classes.

    Raises
    ------
    ConfigError
        A folder that is not one, a window without frames, a frame Pillow cannot read, a
        label out of range, or two streams of the same name.
    """
    streams = [FrameStream(path.name, tuple(load_frame_folders(
        path, shape=models.shape, classes=models.classes))) for path in folders]
    if len({s.name for s in streams}) != len(streams):
        raise ConfigError("frame folders must have distinct names", field="--frames")
    return streams
