"""Developer tools shared by tests, benchmarks and scripts (not part of the installed package)."""
