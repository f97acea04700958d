"""`python -m benchmarks`: kernel, model, memory and the explorer, ours and PyTorch's in the same run;
`python -m benchmarks NAME`: one benchmark of its own (benchmarks/__main__.py lists them)."""
