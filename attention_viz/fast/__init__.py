"""Opt-in speed, chosen explicitly: kernels bit-identical to the core's reference (attention), or equal to their
reference within float rounding where they say so (logprob); imports core, never the reverse."""
