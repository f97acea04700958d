"""`python -m benchmarks`: kernel, model, memory and app latency, ours and PyTorch's in the same run."""
