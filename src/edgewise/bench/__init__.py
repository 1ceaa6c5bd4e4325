"""The one benchmark kit: BenchSpec, the driver, progress, timings and plots."""
