"""Suites: benchmarks and runs that span several problems (a suite may import any problem;
no problem imports a suite)."""
