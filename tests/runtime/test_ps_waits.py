"""The parameter server's replies that wait (runtime.ps): a synchronous push until its step is
taken, a push under SSP until its worker is within the bound; a torn-down server fails them.
The server class runs in this process, without Ray; one case goes through the data plane."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

from edgewise.nn.workload import build_model
from edgewise.nn.workload.spec import builtin_workload
from edgewise.runtime.ps import ParameterServer
from edgewise.runtime.psplane import PUSH_SYNC, PlaneClient
from edgewise.runtime.staleness import Treatment
from edgewise.runtime.trainstate import FlatState
from edgewise.wire.frames import decode, encode

MODEL = "digits-cnn"
SERVER = ParameterServer.__ray_metadata__.modified_class  # type: ignore[attr-defined]


def _validation() -> bytes:
    rng = np.random.default_rng(0)
    return encode({"x": torch.from_numpy(rng.random((8, 64), dtype=np.float32)),
                   "y": torch.from_numpy(rng.integers(0, 10, 8)), "ids": torch.arange(8)})


def _server(treatment: str = "none", transport: str = "ray") -> Any:
    return SERVER(MODEL, 0, "adam", 1e-3, 0.9, 1.0, _validation(), None, "lz4",
                  treatment=Treatment(treatment, ssp_bound=1), transport=transport)


def _frame(seed: int, ids: list[int], base: int = 0) -> np.ndarray:
    """A gradients frame of the same network with seeded random gradients."""
    workload = builtin_workload(MODEL)
    flat = FlatState(build_model(workload, seed=0, num_classes=10,
                                 input_shape=workload.task.input_shape))
    generator = torch.Generator().manual_seed(seed)
    for grad in flat.grads.values():
        grad.copy_(torch.randn(grad.shape, generator=generator))
    return np.frombuffer(flat.gradients_frame(np.array(ids, np.int64), "lz4", base=base),
                         np.uint8)


def _version(frame: Any) -> int:
    return int(decode(bytes(frame)).meta["updates"])


@pytest.fixture
def sync_server() -> Iterator[Any]:
    server = _server()
    server.begin_epoch(0, ["nano-0", "nano-1"])
    yield server
    server.stop()


def test_a_synchronous_push_waits_for_its_step_and_both_get_its_weights(
        sync_server: Any) -> None:
    first = sync_server.push_sync_later("nano-0", 0, _frame(1, [0, 1]))
    assert not first.done() and sync_server.updates == 0
    second = sync_server.push_sync_later("nano-1", 0, _frame(2, [2, 3, 4]))
    assert first.done() and second.done()
    assert sync_server.updates == 1  # one step for the two pushes
    assert bytes(first.result()) == bytes(second.result())
    assert _version(first.result()) == 1


def test_a_leaving_peer_lets_the_step_go_on(sync_server: Any) -> None:
    waiting = sync_server.push_sync_later("nano-0", 0, _frame(1, [0, 1]))
    assert not waiting.done()
    sync_server.leave("nano-1")
    assert waiting.done() and _version(waiting.result()) == 1


def test_a_torn_down_server_fails_what_waits(sync_server: Any) -> None:
    waiting = sync_server.push_sync_later("nano-0", 0, _frame(1, [0, 1]))
    sync_server.stop()
    with pytest.raises(RuntimeError, match="stopped"):
        waiting.result(timeout=5)
    late = sync_server.push_sync_later("nano-1", 0, _frame(2, [2]))
    with pytest.raises(RuntimeError, match="stopped"):
        late.result(timeout=5)


def test_ssp_holds_a_worker_more_than_the_bound_ahead_until_the_slowest_catches_up() -> None:
    server = _server("ssp")
    server.begin_epoch(0, ["nano-0", "nano-1"])
    ahead_by_one = server.push_async_later(_frame(1, [0]), "nano-0")
    assert ahead_by_one.done()  # 1 clock ahead, the bound is 1
    ahead_by_two = server.push_async_later(_frame(2, [1]), "nano-0")
    assert not ahead_by_two.done()
    assert server.updates == 2  # applied at once; only the reply waits
    caught_up = server.push_async_later(_frame(3, [2]), "nano-1")
    assert caught_up.done() and ahead_by_two.done()
    assert _version(ahead_by_two.result()) == 3  # the weights when it was let go
    server.stop()


def test_a_synchronous_step_through_the_data_plane(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers' connections: the first push is answered only once the second arrives,
    each with the step's weights."""
    import ray.util

    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: "127.0.0.1")
    server = _server(transport="socket")
    server.begin_epoch(0, ["nano-0", "nano-1"])
    clients = [PlaneClient(server.plane_endpoint(), f"nano-{i}") for i in range(2)]
    try:
        clients[0].send(PUSH_SYNC, 0, _frame(1, [0, 1]))
        clients[0].conn.settimeout(0.3)
        with pytest.raises(ConnectionError, match="timed out"):  # no step yet: no reply
            clients[0].receive()
        clients[0].conn.settimeout(None)
        replies = [clients[1].call(PUSH_SYNC, 0, _frame(2, [2]))]
        replies.append(clients[0].receive())
        assert [_version(r) for r in replies] == [1, 1]
        assert replies[0].tobytes() == replies[1].tobytes()
    finally:
        for client in clients:
            client.close()
        server.stop()
