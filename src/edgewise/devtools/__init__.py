"""Developer tools of a source checkout (not used at run time)."""
