"""workbench: throughput, MFU and cost of real workloads: measured, projected and published, with provenance.

Modules: catalog (chips and prices), workloads (decoder LM, small CNN), flops, timing, metrics, cost,
results (record schema and store), run (measurement), projection, plots, cli (``tpu-bench``).
See docs/workbench.md.
"""
