"""The API under a real uvicorn on 127.0.0.1: with and without the token, a body too large."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx

from edgewise.service import InMemoryBackend, load_or_create_token
from edgewise.service.app import make_server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_real_server_requires_the_token(backend: InMemoryBackend, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    port = _free_port()
    server = make_server(backend, port=port, token_path=token_file)
    server.config.log_level = "warning"
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 4
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.started
        url = f"http://127.0.0.1:{port}/api/v1/health"
        token = load_or_create_token(token_file)
        ok = httpx.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=2)
        assert ok.status_code == 200 and ok.json() == {"status": "ok"}
        assert "server" not in ok.headers
        assert httpx.get(url, timeout=2).status_code == 401
        big = (b" " * 1024 for _ in range(100))  # chunked, no Content-Length, over 64 KiB
        jobs = url.replace("health", "jobs")
        auth = {"Authorization": f"Bearer {token}"}
        assert httpx.post(jobs, content=big, headers=auth, timeout=2).status_code == 413
    finally:
        server.should_exit = True
        thread.join(timeout=3)
    assert not thread.is_alive()
