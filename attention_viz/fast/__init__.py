"""Opt-in speed: kernels bit-identical to the core's reference, chosen explicitly; imports core, never the reverse."""
