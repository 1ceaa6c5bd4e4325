"""Hypothesis settings for the sites tests: few, fast examples (2-core machine)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile("sites", max_examples=12, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
