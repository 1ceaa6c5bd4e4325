"""The API's thread yields CPU to the jobs: ``lower_api_priority`` lowers only the calling
thread's priority, and the threads it starts inherit it."""

from __future__ import annotations

import os
import threading

import pytest

from edgewise.service.server import lower_api_priority


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="no per-thread priorities here")
def test_only_the_api_thread_and_its_children_are_lowered() -> None:
    seen: dict[str, int] = {}

    def api() -> None:
        before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        lower_api_priority(5)
        seen["api"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) - before

        def pool_worker() -> None:
            seen["child"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) - before

        child = threading.Thread(target=pool_worker)
        child.start()
        child.join()

    main_before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    if main_before + 5 > 19:
        pytest.skip("the test already runs at the lowest priorities")
    thread = threading.Thread(target=api)
    thread.start()
    thread.join()
    assert seen == {"api": 5, "child": 5}
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == main_before
