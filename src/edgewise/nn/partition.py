"""Any traced model cut at its candidate partition points (SEIFER §3.1) into stage modules:
stage ``k`` is a ``torch.fx`` graph from the tensor at one point to the tensor at a later one.

Because a candidate point lies on every path from the input to the output, everything a
stage computes from the input flows through the tensor at its first point; what it needs
besides (weights, buffers, constants, sub-graphs that do not depend on the input) it holds
or recomputes itself. A stage is therefore an ordinary module of one tensor, built from the
same graph the analysis traced, and it runs wherever the weights are sent (see
:func:`edgewise.wire.state.stage_payload`).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import pairwise

import networkx as nx
import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import TensorMetadata

from edgewise.errors import ConfigError
from edgewise.nn.chain import ModelChain
from edgewise.nn.graph import Example, TracedGraph, candidate_points, dag_of, to_chain, trace_graph

__all__ = ["PartitionedModel", "partition_model"]


@dataclass(frozen=True, slots=True, eq=False)
class PartitionedModel:
    """A model traced once, with the candidate points whose value is one tensor (the source
    and the sink included) and the chain of segments between them (what the placement
    policies plan). :meth:`split` cuts the traced graph at a plan's boundaries."""

    name: str
    traced: TracedGraph
    dag: nx.DiGraph
    points: tuple[str, ...]
    chain: ModelChain

    def stage(self, start: int, end: int) -> fx.GraphModule:
        """The module from ``points[start]`` (its one input) to ``points[end]`` (its output).

        Raises
        ------
        ConfigError
            If ``0 <= start < end < len(points)`` does not hold.
        """
        if not 0 <= start < end < len(self.points):
            raise ConfigError(f"a stage runs from one point to a later one of "
                              f"0..{len(self.points) - 1}, got {start}..{end}", field="cuts")
        return _stage(self.traced, self.points[start], self.points[end])[0]

    def stage_with_sources(self, start: int, end: int
                           ) -> tuple[fx.GraphModule, dict[str, str]]:
        """:meth:`stage` and, for each of its state-dict entries that is one of the model's
        own (parameters and persistent buffers), the model's name for it: what the stage
        loads by name from the model's weights. Entries not listed (folded constants,
        non-persistent buffers) the stage holds itself."""
        if not 0 <= start < end < len(self.points):
            raise ConfigError(f"a stage runs from one point to a later one of "
                              f"0..{len(self.points) - 1}, got {start}..{end}", field="cuts")
        gm, names = _stage(self.traced, self.points[start], self.points[end])
        return gm, _sources(self.traced, names, gm)

    def split(self, cuts: Sequence[int]) -> list[nn.Module]:
        """One stage per partition: partition ``k`` runs segments ``cuts[k] .. cuts[k+1]-1``
        of :attr:`chain` (as a :class:`~edgewise.pipeline.problem.PipelinePlan` says).

        Raises
        ------
        ConfigError
            If the cuts do not rise strictly from 0 to the number of segments.
        """
        bounds = list(cuts)
        n = self.chain.n_segments
        if len(bounds) < 2 or bounds[0] != 0 or bounds[-1] != n or any(
                b <= a for a, b in pairwise(bounds)):
            raise ConfigError(f"cuts {bounds} must rise strictly from 0 to {n}", field="cuts")
        return [self.stage(a, b) for a, b in pairwise(bounds)]

    def splitter(self, _model: nn.Module, cuts: tuple[int, ...]) -> list[nn.Module]:
        """:meth:`split` in the shape the pipeline's dispatcher takes (its model is this one)."""
        return self.split(cuts)


def partition_model(name: str, model: nn.Module, example: Example,
                    dtype_bytes: int = 4) -> PartitionedModel:
    """Trace ``model`` (in the mode it is in; call ``.eval()`` for inference) on ``example``
    and keep its candidate points whose value is a single tensor.

    Raises
    ------
    ConfigError
        If the model cannot be traced, takes more than one input tensor, or returns more
        than one tensor.
    """
    traced = trace_graph(model, example)
    if len(traced.inputs) != 1:
        raise ConfigError(f"{name} takes {len(traced.inputs)} inputs; a pipeline sends one "
                          "tensor per request", field="model")
    dag = dag_of(traced, dtype_bytes)
    nodes = {n.name: n for n in traced.module.graph.nodes}
    sink = dag.graph["sink"]
    if nodes[str(sink)].op == "output":
        raise ConfigError(f"{name} returns several tensors; a pipeline returns one per "
                          "request (wrap the model so that it returns its logits)",
                          field="model")
    found: list[Hashable] = candidate_points(dag)
    points = [p for p in found if p in (found[0], sink) or _one_tensor(nodes[str(p)])]
    chain = to_chain(name, dag, points)
    return PartitionedModel(name, traced, dag, tuple(str(p) for p in points), chain)


def _one_tensor(node: fx.Node) -> bool:
    """Whether the node's value is exactly one tensor (what a frame between stages carries)."""
    meta = node.meta.get("tensor_meta", node.meta.get("val"))
    return isinstance(meta, TensorMetadata | torch.Tensor)


def _needed(end: fx.Node, start: fx.Node) -> set[fx.Node]:
    """The nodes ``end`` depends on, the walk stopping at ``start``."""
    need, stack = {end}, [end]
    while stack:
        node = stack.pop()
        if node is start:
            continue
        for arg in node.all_input_nodes:
            if arg not in need:
                need.add(arg)
                stack.append(arg)
    return need


class _Holder:
    """The state a stage's graph reads, under flat attribute names of one new module."""

    def __init__(self, traced: TracedGraph) -> None:
        self.traced, self.root = traced, nn.Module()
        self.names: dict[str, str] = {}

    def attach(self, key: str, value: object) -> str:
        """Register ``value`` (module, parameter, buffer or other attribute) once."""
        if key in self.names:
            return self.names[key]
        flat = re.sub(r"\W", "_", key)
        while hasattr(self.root, flat):
            flat += "_"
        if isinstance(value, nn.Module):
            self.root.add_module(flat, value)
        elif isinstance(value, nn.Parameter):
            self.root.register_parameter(flat, value)
        elif isinstance(value, torch.Tensor):
            self.root.register_buffer(flat, value)
        else:
            setattr(self.root, flat, value)
        self.names[key] = flat
        return flat

    def target(self, node: fx.Node) -> str:
        """The flat name of what a ``get_attr`` or ``call_module`` node reads."""
        key = str(node.target)
        return self.attach(key, operator.attrgetter(key)(self.traced.module))


def _sources(traced: TracedGraph, names: dict[str, str], gm: fx.GraphModule
             ) -> dict[str, str]:
    """Stage state-dict key -> the traced model's state-dict key, for what the stage reads
    from the model (``names``: the holder's original key -> flat attribute)."""
    own = set(traced.module.state_dict()) | set(traced.sources.values())
    out: dict[str, str] = {}
    for key, flat in names.items():
        if key.startswith("~"):  # an export placeholder (or a folded constant: none)
            fqn = traced.sources.get(key[1:])
            if fqn is not None:
                out[flat] = fqn
            continue
        value = operator.attrgetter(key)(traced.module)
        if isinstance(value, nn.Module):
            out |= {f"{flat}.{sub}": f"{key}.{sub}" for sub in value.state_dict()}
        else:
            out[flat] = key
    kept = set(gm.state_dict())
    return {k: v for k, v in out.items() if k in kept and v in own}


def _stage(traced: TracedGraph, first: str, last: str
           ) -> tuple[fx.GraphModule, dict[str, str]]:
    """The graph from the node ``first`` (its input) to the node ``last`` (its output).

    Operations that read neither the input nor any weight (``arange``, non-persistent
    buffers and what is computed from them, e.g. an attention mask or position ids) are
    computed here once and held as buffers: a graph
    module is re-traced when it is unpickled, and re-tracing would turn them into constants
    that its state dict does not list."""
    nodes = {n.name: n for n in traced.module.graph.nodes}
    start, end = nodes[first], nodes[last]
    need = _needed(end, start)
    graph, holder = fx.Graph(), _Holder(traced)
    env: dict[fx.Node, fx.Node] = {start: graph.placeholder("x")}
    folded: dict[fx.Node, torch.Tensor] = {}

    def arg(node: fx.Node) -> fx.Node:
        if node not in env:  # a folded constant, first read here
            env[node] = graph.get_attr(holder.attach(f"~const:{node.name}", folded[node]))
        return env[node]

    for node in traced.module.graph.nodes:
        if node not in need or node is start:
            continue
        value = _fold(node, folded)
        if value is not None:
            folded[node] = value
        elif node.op == "placeholder":
            if node.name not in traced.tensors:
                raise ConfigError(f"the stage from {first} to {last} needs the input "
                                  f"{node.name} too; {first} is not a partition point",
                                  field="points")
            if node.name not in traced.sources:  # a constant or a non-persistent buffer
                folded[node] = traced.tensors[node.name]
                continue
            env[node] = graph.get_attr(holder.attach(f"~{node.name}", traced.tensors[node.name]))
        elif node.op in ("get_attr", "call_module"):
            env[node] = graph.create_node(node.op, holder.target(node),
                                          fx.map_arg(node.args, arg), fx.map_arg(node.kwargs, arg),
                                          name=node.name)
        else:
            env[node] = graph.node_copy(node, arg)
    graph.output(arg(end))
    return fx.GraphModule(holder.root, graph, class_name="Stage"), holder.names


def _fold(node: fx.Node, folded: dict[fx.Node, torch.Tensor]) -> torch.Tensor | None:
    """The node's value if it is a function of folded constants alone (or of nothing) and
    a tensor; None otherwise."""
    if node.op != "call_function" or any(a not in folded for a in node.all_input_nodes):
        return None
    args = fx.map_arg(node.args, folded.__getitem__)
    kwargs = fx.map_arg(node.kwargs, folded.__getitem__)
    if kwargs.get("device") == torch.device("meta"):  # traced on meta: constants are real
        kwargs = {**kwargs, "device": torch.device("cpu")}
    with torch.no_grad():
        value = node.target(*args, **kwargs)  # type: ignore[operator]
    return value.clone() if isinstance(value, torch.Tensor) else None
