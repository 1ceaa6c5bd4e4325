"""A DNN's layer DAG, its candidate partition points (SEIFER §3.1) and the chain between them.

`layer_dag` traces a PyTorch model with ``torch.fx.symbolic_trace`` (plain modules) or, when
that fails (Hugging Face models, data-dependent control flow, keyword inputs), with
``torch.export.export(strict=False)``; the DAG's ``graph["tracer"]`` says which. Each vertex
is one traced operation with its output size, its parameter bytes and its FLOPs.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Hashable, Sequence
from itertools import pairwise
from typing import Any, NamedTuple

import networkx as nx
import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata

from edgewise.errors import ConfigError
from edgewise.nn.chain import ModelChain
from edgewise.nn.cuts import candidate_points, dag_ends, explain_no_candidates, topological_depth
from edgewise.nn.tracing import TRACE_LOCK

__all__ = ["TracedGraph", "candidate_points", "dag_of", "explain_no_candidates", "layer_dag",
           "to_chain", "topological_depth", "trace_graph"]

Example = torch.Tensor | tuple[torch.Tensor, ...] | dict[str, torch.Tensor]


class TracedGraph(NamedTuple):
    """A traced model: its graph, the tracer ("fx" or "export"), the names of the user-input
    placeholders and, for export, the tensor behind each parameter, buffer and constant
    placeholder (tied ones are one tensor) and the model's own name of each parameter and
    buffer placeholder (``sources``: what a stage loads by name)."""

    module: fx.GraphModule
    tracer: str
    inputs: set[str]
    tensors: dict[str, torch.Tensor]
    sources: dict[str, str] = {}  # noqa: RUF012 - never mutated

# Operations that only re-describe memory (or are identities at inference): 0 FLOPs.
_FREE = frozenset({
    "view", "reshape", "_unsafe_view", "permute", "transpose", "t", "flatten", "unflatten",
    "size", "sym_size", "getattr", "getitem", "contiguous", "expand", "expand_as", "unsqueeze",
    "squeeze", "slice", "select", "split", "chunk", "unbind", "alias", "detach", "clone", "to",
    "type_as", "dropout", "Dropout", "Identity", "Flatten", "lift_fresh_copy", "_assert",
})
_MATMUL = frozenset({"matmul", "mm", "bmm", "__matmul__"})


# ------------------------------------------------------------------ tracing
def trace_graph(model: nn.Module, example: Example) -> TracedGraph:
    """Trace with fx (shapes by ShapeProp) or fall back to torch.export (shapes in meta).

    Holds ``TRACE_LOCK``: tracing patches every module's call in the process.

    Raises
    ------
    ConfigError
        If neither torch.fx nor torch.export can trace the model.
    """
    with TRACE_LOCK:
        return _trace_locked(model, example)


def _trace_locked(model: nn.Module, example: Example) -> TracedGraph:
    if not isinstance(example, dict):
        args = example if isinstance(example, tuple) else (example,)
        try:
            gm = fx.symbolic_trace(model)
            gm.graph.eliminate_dead_code()
            ShapeProp(gm).propagate(*args)
            inputs = {n.name for n in gm.graph.nodes if n.op == "placeholder"}
            return TracedGraph(gm, "fx", inputs, {})
        except Exception:  # fx cannot trace data-dependent Python; export can
            pass
        kwargs: dict[str, torch.Tensor] = {}
    else:
        args, kwargs = (), example
    try:
        ep = torch.export.export(model, args, kwargs=kwargs, strict=False)
    except Exception as exc:
        raise ConfigError(f"cannot trace {type(model).__name__} with torch.fx or torch.export: "
                          f"{exc}", field="model") from exc
    sig = ep.graph_signature
    named = {**dict(model.named_parameters(remove_duplicate=False)),
             **dict(model.named_buffers(remove_duplicate=False)), **ep.constants}
    state = {**sig.inputs_to_parameters, **sig.inputs_to_buffers,
             **sig.inputs_to_lifted_tensor_constants}
    tensors = {ph: named[fqn] for ph, fqn in state.items()
               if isinstance(named.get(fqn), torch.Tensor)}
    sources = {ph: fqn for ph, fqn in {**sig.inputs_to_parameters,
                                       **sig.inputs_to_buffers}.items()
               if ph in tensors and fqn not in sig.non_persistent_buffers}
    return TracedGraph(ep.graph_module, "export", set(sig.user_inputs), tensors, sources)


def _tensors(meta: Any) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """Flatten a node's output (TensorMetadata, FakeTensor or nests of them) to shapes."""
    if isinstance(meta, TensorMetadata | torch.Tensor):
        return [(tuple(int(d) for d in meta.shape), meta.dtype)]
    if isinstance(meta, list | tuple):
        return [t for m in meta for t in _tensors(m)]
    if isinstance(meta, dict):
        return [t for m in meta.values() for t in _tensors(m)]
    return []


def _outputs(node: fx.Node) -> list[tuple[tuple[int, ...], torch.dtype]]:
    return _tensors(node.meta.get("tensor_meta", node.meta.get("val")))


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _nbytes(numel: int, dtype: torch.dtype, dtype_bytes: int) -> int:
    """Floating tensors at ``dtype_bytes`` per element; integer and bool at their own size."""
    return numel * (dtype_bytes if dtype.is_floating_point else dtype.itemsize)


def _op_name(node: fx.Node, gm: fx.GraphModule) -> str:
    if node.op == "call_module":
        return type(gm.get_submodule(str(node.target))).__name__
    if node.op == "call_function":
        return getattr(node.target, "__name__", str(node.target)).split(".")[0]
    return str(node.target)


def _arg_shape(node: fx.Node, i: int) -> tuple[int, ...]:
    arg = node.args[i] if i < len(node.args) else None
    shapes = _outputs(arg) if isinstance(arg, fx.Node) else []
    return shapes[0][0] if shapes else ()


def _flops(node: fx.Node, gm: fx.GraphModule, name: str) -> float:
    """FLOPs, counting a multiply-add as 2: Linear 2·out·in; Conv 2·out·(C_in/groups)·k;
    matmul/bmm/addmm/baddbmm 2·out·K; attention 2·2·B·H·L·S·E; shape-only ops 0; anything
    else (elementwise, norms, pooling, softmax) one per output element."""
    out = sum(_numel(s) for s, _ in _outputs(node))
    if name in _FREE or node.op in ("placeholder", "get_attr", "output"):
        return 0.0
    if node.op == "call_module":
        weight = getattr(gm.get_submodule(str(node.target)), "weight", None)
        if name == "Linear" or name.startswith("Conv"):
            return 2.0 * out * _numel(tuple(weight.shape[1:])) if weight is not None else 0.0
        return float(out)
    if name in ("linear", "conv1d", "conv2d", "conv3d", "convolution"):
        return 2.0 * out * _numel(_arg_shape(node, 1)[1:])
    if name in _MATMUL or name in ("addmm", "baddbmm"):
        first = 1 if name in ("addmm", "baddbmm") else 0
        return 2.0 * out * (_arg_shape(node, first) or (1,))[-1]
    if name == "scaled_dot_product_attention":
        q, v = _arg_shape(node, 0), _arg_shape(node, 2)
        return 2.0 * _numel(q[:-1]) * v[-2] * (q[-1] + v[-1]) if q and v else 0.0
    return float(out)


def _state_bytes(node: fx.Node, gm: fx.GraphModule, params: dict[str, torch.Tensor],
                 seen: set[int], dtype_bytes: int) -> int:
    """Bytes of the parameters and buffers first used by this node (shared ones count once)."""
    if node.op == "call_module":
        mod = gm.get_submodule(str(node.target))
        tensors = [*mod.parameters(), *mod.buffers()]
    elif node.op == "get_attr":
        attr = operator.attrgetter(str(node.target))(gm)
        tensors = [attr] if isinstance(attr, torch.Tensor) else []
    elif node.op == "placeholder" and node.name in params:
        tensors = [params[node.name]]
    else:
        return 0
    fresh = [t for t in tensors if id(t) not in seen]
    seen.update(id(t) for t in fresh)
    return sum(_nbytes(t.numel(), t.dtype, dtype_bytes) for t in fresh)


# ------------------------------------------------------------------ the DAG
def layer_dag(model: nn.Module, example: Example, dtype_bytes: int = 4) -> nx.DiGraph:
    """The model's layer DAG: one vertex per traced operation, from the input to the output.

    Parameters
    ----------
    model : torch.nn.Module
        The model, as it should run (call ``.eval()`` first for inference graphs).
    example : Tensor, tuple of Tensor or dict of str to Tensor
        An example input; its batch is the batch of every size. A dict is passed as keyword
        arguments (Hugging Face models: their ``main_input_name``) and traced by torch.export.
    dtype_bytes : int, default 4
        Bytes per element of floating tensors and parameters (integers keep their own size).

    Returns
    -------
    networkx.DiGraph
        Vertices are fx node names with attributes ``op`` (fx opcode), ``target`` (module
        path, method or function name), ``layer`` (module class or operator name),
        ``output_bytes``, ``param_bytes`` and ``flops``; ``graph`` holds ``tracer`` ("fx"
        or "export"), ``source``, ``sink`` and ``dtype_bytes``. Parameters, buffers and constant
        sub-graphs are folded into their first consumer, operations that do not reach the
        output are dropped, and several inputs are joined under one source vertex "input".

    Raises
    ------
    ConfigError
        If neither torch.fx nor torch.export can trace the model.
    """
    return dag_of(trace_graph(model, example), dtype_bytes)


def dag_of(traced: TracedGraph, dtype_bytes: int = 4) -> nx.DiGraph:
    """The layer DAG of an already traced model (see :func:`layer_dag`); its vertices are
    the names of the traced graph's nodes."""
    gm, tracer, inputs, params, _ = traced
    nodes = list(gm.graph.nodes)
    dag = nx.DiGraph(tracer=tracer, dtype_bytes=dtype_bytes)
    seen: set[int] = set()
    user = [n for n in nodes if n.op == "placeholder" and n.name in inputs]
    for n in nodes:
        name = _op_name(n, gm)
        dag.add_node(n.name, op=n.op, layer=name,
                     target=name if n.op == "call_function" else str(n.target),
                     output_bytes=sum(_nbytes(_numel(s), d, dtype_bytes) for s, d in _outputs(n)),
                     param_bytes=_state_bytes(n, gm, params, seen, dtype_bytes),
                     flops=_flops(n, gm, name))
        dag.add_edges_from((a.name, n.name) for a in n.all_input_nodes)
    sink = _simplify_output(dag, next(n for n in reversed(nodes) if n.op == "output"))
    source = _join_inputs(dag, [n.name for n in user])
    _fold(dag, source, sink)
    dag.graph.update(source=source, sink=sink)
    return dag


def _simplify_output(dag: nx.DiGraph, out: fx.Node) -> Hashable:
    """A single returned tensor is the sink itself; several stay joined by the output vertex."""
    preds = list(dag.predecessors(out.name))
    if len(preds) != 1:
        dag.nodes[out.name]["output_bytes"] = sum(dag.nodes[p]["output_bytes"] for p in preds)
        return out.name
    dag.remove_node(out.name)
    sink: Hashable = preds[0]
    return sink


def _join_inputs(dag: nx.DiGraph, user: list[str]) -> Hashable:
    if len(user) == 1:
        return user[0]
    dag.add_node("input", op="placeholder", target="input", layer="input", param_bytes=0,
                 flops=0.0,
                 output_bytes=sum(dag.nodes[u]["output_bytes"] for u in user))
    dag.add_edges_from(("input", u) for u in user)
    return "input"


def _fold(dag: nx.DiGraph, source: Hashable, sink: Hashable) -> None:
    """Move the bytes and FLOPs of vertices off every source→sink path into their first
    descendant on one (the sink when none), then drop them."""
    keep = (nx.descendants(dag, source) | {source}) & (nx.ancestors(dag, sink) | {sink})
    order = {v: i for i, v in enumerate(nx.topological_sort(dag))}
    target: dict[Hashable, Hashable] = {}
    for v in sorted(set(dag) - keep, key=order.__getitem__, reverse=True):
        heirs = [s if s in keep else target[s] for s in dag.successors(v)]
        target[v] = min(heirs, key=order.__getitem__) if heirs else sink
        for key in ("param_bytes", "flops"):
            dag.nodes[target[v]][key] += dag.nodes[v][key]
    dag.remove_nodes_from(target)


# ------------------------------------------------------------------ SEIFER §3.1
def to_chain(name: str, dag: nx.DiGraph, points: Sequence[Hashable]) -> ModelChain:
    """The chain of segments between consecutive points (as `candidate_points` returns them).

    Segment ``i`` holds the vertices deeper than ``points[i]`` up to ``points[i + 1]``; its
    ``output_bytes`` is the output of ``points[i + 1]``, its ``memory_bytes`` the parameters of
    its vertices plus its largest single activation (at the DAG's dtype and batch), its
    ``flops`` their sum; ``input_bytes`` is the source's output.

    Raises
    ------
    ConfigError
        If the points do not start at the source, end at the sink and deepen strictly.
    """
    depth = topological_depth(dag)
    source, sink = dag_ends(dag)
    cuts = [depth[p] for p in points]
    if len(points) < 2 or points[0] != source or points[-1] != sink or any(
            a >= b for a, b in pairwise(cuts)):
        raise ConfigError(f"model {name!r}: points must run from the source to the sink in "
                          "increasing depth", field="points")
    segs: list[list[Hashable]] = [[] for _ in points[1:]]
    for v, d in depth.items():
        if d > 0:
            segs[bisect_left(cuts, d) - 1].append(v)
    at = dag.nodes
    return ModelChain(
        name=name, input_bytes=int(at[source]["output_bytes"]),
        output_bytes=tuple(int(at[p]["output_bytes"]) for p in points[1:]),
        memory_bytes=tuple(sum(at[v]["param_bytes"] for v in s)
                           + max((at[v]["output_bytes"] for v in s), default=0) for s in segs),
        flops=tuple(float(sum(at[v]["flops"] for v in s)) for s in segs),
        labels=tuple(str(p) for p in points[1:]))

