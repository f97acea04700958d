"""Opt-in speed, chosen explicitly: kernels bit-identical to the core's reference (attention), the model's passes
and its greedy decode written out flat, bit-identical to its modules' (passes, decode), or equal to their reference
within float rounding where they say so (logprob); imports core, never the reverse."""
