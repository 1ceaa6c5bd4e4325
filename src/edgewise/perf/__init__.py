"""Measuring and predicting: profiler, stressors, background apps, learned performance and
interference models, calibrated device profiles."""
