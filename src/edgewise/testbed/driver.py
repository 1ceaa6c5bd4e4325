"""A driver on a testbed: this process (or a command) inside the head device's network
namespace, with the testbed's token, joined as a Ray driver (as on a real cluster, where the
driver runs on the head)."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from edgewise.runtime.ray_cluster import (
    ADDRESS_ENV,
    INLINE_ENV,
    RayRuntime,
    join_cluster,
    refresh_auth,
)
from edgewise.testbed.host import TestbedError
from edgewise.testbed.net import NETNS_DIR
from edgewise.testbed.record import Record

__all__ = ["driver_env", "exec_env", "inside", "joined"]

_CLONE_NEWNET = 0x40000000
_AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS", ADDRESS_ENV)
TESTBED_ENV = "EDGEWISE_TESTBED"


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        raise TestbedError(f"setns failed: {os.strerror(ctypes.get_errno())}")


@contextmanager
def inside(netns: str) -> Iterator[None]:
    """Run the calling thread (and the threads it starts) in network namespace ``netns``
    for the body, then return it to where it was."""
    try:
        target = os.open(f"{NETNS_DIR}/{netns}", os.O_RDONLY)
    except OSError as exc:
        raise TestbedError(f"no network namespace {netns}: {exc.strerror}") from None
    own = os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(target)
        os.close(own)


def exec_env(record: Record) -> dict[str, str]:
    """The variables that point a driver at the testbed: its head and its token, and Ray's
    size of the objects it passes inline, as the testbed's nodes have it
    (``ray_cluster.INLINE_OBJECT_BYTES``)."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": record.token_path,
            "RAY_ADDRESS": record.plan.head_address, ADDRESS_ENV: record.plan.head_address,
            TESTBED_ENV: record.name, **INLINE_ENV}


@contextmanager
def driver_env(record: Record) -> Iterator[None]:
    """This process's environment set for a driver of the testbed, restored afterwards
    (and Ray made to re-read it both times)."""
    saved = {k: os.environ.get(k) for k in (*_AUTH_VARS, *exec_env(record))}
    os.environ.pop("RAY_AUTH_TOKEN", None)
    os.environ.update(exec_env(record))
    refresh_auth()
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        refresh_auth(enable_if_token=False)


@contextmanager
def joined(record: Record, wait_s: float = 60.0,
           require_all: bool = True) -> Iterator[RayRuntime]:
    """This process joined to the testbed as a Ray driver for the body: inside the head's
    namespace, with its token; every device checked registered (unless not
    ``require_all``)."""
    if not Path(record.token_path).exists():
        raise TestbedError(f"testbed {record.name!r} has lost its token {record.token_path}")
    with ExitStack() as stack:
        stack.enter_context(inside(record.plan.head.netns))
        stack.enter_context(driver_env(record))
        runtime = join_cluster(record.cluster, record.plan.head_address, wait_s=wait_s,
                               require_all=require_all)
        stack.callback(runtime.shutdown)
        yield runtime
