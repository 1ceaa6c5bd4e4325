"""Faults through the API on the emulated cluster: a worker killed for real mid-job is
seen as a fault and a strike, the job re-plans and still succeeds, and Prometheus counts
both; the emulated cluster's Ray listens on loopback only, with no metrics exporter."""

from __future__ import annotations

import ipaddress
import time

import psutil
import pytest
from managerproc import ManagerProcess
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.ray, pytest.mark.system, pytest.mark.slow]


def _samples(manager: ManagerProcess, family: str) -> dict[tuple[tuple[str, str], ...], float]:
    import httpx

    text = httpx.get(manager.url + "/metrics", headers=manager.headers, timeout=30).text
    found = {}
    for f in text_string_to_metric_families(text):
        if f.name == family:
            found = {tuple(sorted(s.labels.items())): s.value for s in f.samples}
    return found


@pytest.mark.timeout(600)
def test_a_killed_worker_is_a_fault_a_strike_and_a_replan(manager: ManagerProcess) -> None:
    # the apps are off: this checks the fault path (and that the flag leaves them out).
    # The kill must land before the job ends: after the first epoch is seen, seven more
    # (a few seconds idle, more when a load slows the job) against one poll and one POST.
    job = manager.post("/api/v1/jobs", {"kind": "update",
                                        "spec": {"epochs": 8, "background_apps": False}})
    deadline = time.monotonic() + 300
    while (manager.get(f"/api/v1/jobs/{job['id']}")["summary"].get("epoch") or 0) < 1:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    fault = manager.post("/api/v1/faults", {"kind": "kill-worker", "device": "nano-1"})
    assert fault["kind"] == "kill" and fault["target"].endswith("nano-1")
    done = manager.wait_job(job["id"], timeout_s=300)
    assert done["state"] == "succeeded" and done["summary"]["restarts"] >= 1, done
    assert done["summary"]["apps"] == 0 == done["summary"]["app_periods"]
    kinds = [e["kind"] for e in manager.get(f"/api/v1/jobs/{job['id']}/events")]
    assert "fault" in kinds and "strike" in kinds and "replan" in kinds
    assert manager.get("/api/v1/strikes")["strikes"]["nano-1"] >= 1
    cluster = [e["kind"] for e in manager.get("/api/v1/events")]
    assert "fault" in cluster and "strike" in cluster
    time.sleep(1.1)  # the exposition is recomputed at most once a second
    events = _samples(manager, "edgewise_events")
    assert events[(("kind", "fault"),)] >= 2  # the injection and the job's own record
    assert events[(("kind", "strike"),)] >= 2  # the ledger's and the job's
    assert _samples(manager, "edgewise_device_strikes")[(("device", "nano-1"),)] >= 1


def test_the_emulated_clusters_ray_listens_on_loopback_only(manager: ManagerProcess) -> None:
    pids = {p.pid for p in manager.descendants()}
    listening = [c for c in psutil.net_connections("inet")
                 if c.status == psutil.CONN_LISTEN and c.pid in pids]
    assert listening  # Ray's head is there
    for conn in listening:
        address = ipaddress.ip_address(conn.laddr.ip)
        mapped = getattr(address, "ipv4_mapped", None)
        assert (mapped or address).is_loopback, conn
