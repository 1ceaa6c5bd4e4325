"""A manager for the bench: ``edgewise serve`` in a subprocess on 127.0.0.1, with its own
state directory and token; and the listening sockets of a process tree (psutil)."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from edgewise.errors import RuntimeFault

__all__ = ["ServedManager", "free_port", "non_loopback_listeners", "stop_tree"]

STARTUP_S = 240.0
TOKEN = "bench-manager-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class ServedManager:
    """One ``edgewise serve`` (its options after ``serve``), started and stopped by the
    bench; every request goes to 127.0.0.1."""

    state_dir: Path
    options: tuple[str, ...] = ()
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    seen: dict[int, psutil.Process] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKEN}"}

    def start(self) -> None:
        env = {**os.environ, "EDGEWISE_STATE_DIR": str(self.state_dir),
               "EDGEWISE_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}
        log = open(self.state_dir / "serve.log", "wb")  # noqa: SIM115 (the child writes it)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from edgewise.cli import main; main()", "serve",
             "--port", str(self.port), *self.options],
            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + STARTUP_S
        with httpx.Client(headers=self.headers) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeFault(f"the manager exited: {self.log_tail()}")
                try:
                    if client.get(f"{self.url}/api/v1/health", timeout=2).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.5)
        raise RuntimeFault(f"the manager did not answer within {STARTUP_S:g} s")

    def log_tail(self, lines: int = 15) -> str:
        path = self.state_dir / "serve.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def rss_mb(self) -> float:
        assert self.proc is not None
        return psutil.Process(self.proc.pid).memory_info().rss / 2**20

    def client(self, **options: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers, **options)

    def listeners(self) -> list[str]:
        """Non-loopback listening sockets of the manager's process tree now."""
        assert self.proc is not None
        found, procs = non_loopback_listeners(self.proc.pid)
        self.seen.update(procs)
        return found

    def stop(self) -> None:
        """SIGTERM, as a service manager would; then whatever of its tree is left."""
        if self.proc is not None:
            stop_tree(self.proc, self.seen)


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _loopback(ip: str) -> bool:
    """A loopback address, IPv4-mapped IPv6 ones (``::ffff:127.0.0.1``) included."""
    address = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def non_loopback_listeners(pid: int) -> tuple[list[str], dict[int, psutil.Process]]:
    """``"name:address:port"`` of each listening TCP or UDP socket, on an address that is
    not loopback, of process ``pid`` and its descendants; and the processes seen."""
    found: list[str] = []
    procs: dict[int, psutil.Process] = {}
    for proc in _tree(pid):
        procs[proc.pid] = proc
        try:
            conns = proc.net_connections(kind="inet")
            name = proc.name()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        for conn in conns:
            listening = conn.status == psutil.CONN_LISTEN or (
                conn.type == socket.SOCK_DGRAM and not conn.raddr)
            if listening and conn.laddr and not _loopback(conn.laddr.ip):
                found.append(f"{name}:{conn.laddr.ip}:{conn.laddr.port}")
    return found, procs


def stop_tree(proc: subprocess.Popen[bytes], seen: dict[int, psutil.Process],
              grace_s: float = 60.0, sig: int = signal.SIGTERM) -> None:
    """Stop ``proc`` (``sig``, SIGKILL after ``grace_s``), then SIGKILL any process of its
    tree (``seen``: met while it ran) still alive: only processes this bench started
    (psutil refuses to signal a pid that another process has taken since)."""
    seen.update({p.pid: p for p in _tree(proc.pid)})
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
    time.sleep(2.0)
    for pid, child in seen.items():
        if pid == proc.pid:
            continue
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            child.kill()
