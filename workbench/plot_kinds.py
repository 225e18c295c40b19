"""The figures ``tpu-bench plot`` draws, by name: a light module, so ``tpu-bench plot --help`` lists them without
importing matplotlib (plots.py draws them)."""

KINDS = ("throughput", "mfu", "cost", "pareto", "scaling", "roofline")
