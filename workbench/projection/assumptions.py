"""The model's inputs that are not catalog facts, each with its unit (in the name) and the reason for it.

Only ``gemm_efficiency`` is fitted to a published point (see :mod:`tpu_workbench.bench.projection.calibration`,
which records the point); every other default is set from a stated source or argument and never tuned
to the published numbers.
"""

from __future__ import annotations

from dataclasses import InitVar, asdict, dataclass, fields

from tpu_workbench.bench.errors import WorkbenchError

# Fitted by workbench.projection.calibration.calibrate() on the calibration point named there
# (tests/workbench/test_projection_calibration.py re-fits it and checks this value).
CALIBRATED_GEMM_EFFICIENCY = 0.8018

REASONS = {
    "gemm_efficiency": "fraction of the dense peak that large, tile-aligned matmuls reach; the one parameter "
    "fitted to a published point (CALIBRATION_POINT in workbench.projection.calibration)",
    "grouped_gemm_relative": "MoE grouped-GEMM efficiency relative to dense GEMMs beyond what the model "
    "computes from the shapes (per-expert tile padding, per-expert roofline, capacity "
    "padding, routing traffic); 1 = no extra penalty assumed",
    "attention_relative": "flash-attention matmul efficiency relative to dense GEMMs beyond tile padding of "
    "head_dim and the 2.5x backward (FlashAttention-2: 5 matmuls backward vs 2 "
    "forward); 1 = no extra penalty assumed",
    "attention_gemm_efficiency": "efficiency of the bf16 GEMMs that attention_relative refers to, where it "
    "differs from gemm_efficiency: a fp8 setting's attention runs as a bf16 kernel, so its efficiency follows "
    "the bf16 GEMMs, not the fitted fp8 ones; None = gemm_efficiency",
    "memory_efficiency": "fraction of HBM bandwidth streaming (elementwise, optimizer, decode) kernels reach, "
    "typically 70-90%",
    "collective_efficiency": "fraction of link bandwidth large collectives reach (bus bandwidth vs line rate)",
    "collective_latency_us": "fixed cost per collective in microseconds (launch + hop latency)",
    "overlap": "share of the asynchronous collectives (FSDP gathers/reduce-scatters, data-parallel gradient "
    "reduction, die-to-die copies) that can hide under compute, up to the compute time; XLA's "
    "async collective fusion (flags in MaxText's configs) and FSDP prefetch do this",
    "critical_overlap": "share of the critical-path collectives (expert all-to-all between router and expert "
    "GEMMs, tensor-parallel activation all-reduces) hidden under compute; 0 unless a "
    "setting documents collective matmuls or comm/compute pipelining",
    "scaleout_gbytes_per_s_per_chip": "scale-out (NIC / TPU DCN) bandwidth per chip and direction in GB/s; "
    "None = the catalog's vendor figure in Gb/s divided by 8",
    "scaleup_domain": "chips one ICI/NVLink domain joins; None = the catalog's (for TPUs the largest slice)",
    "max_tp": "largest tensor-parallel degree the named layouts pick",
    "optimizer_state_bytes_per_param": "bytes of optimizer state per parameter: fp32 master + Adam m and v "
    "(4 + 4 + 4); 10 with bf16 m (MaxText mu_dtype=bfloat16)",
    "straggler_cv": "per-host step-time coefficient of variation; a synchronous step waits for the slowest "
    "of N hosts, about mean x (1 + cv x sqrt(2 ln N)). 1% is an assumption: no published "
    "figure was found",
    "activation_bytes": "bytes per activation element (bf16)",
}

SOURCES = {
    "flash_backward_factor": "FlashAttention-2 (Dao, 2023): the backward pass runs 5 matmuls to the forward's 2",
    "mxu_tile": "maxtext docs/guides/optimization/custom_model.md: v6e and TPU7x MXUs are 256x256, earlier "
    "TPUs 128x128; a 128-wide operand on a 256 MXU halves its efficiency",
}


@dataclass(frozen=True)
class Assumptions:
    """Inputs of the model that are not catalog facts. See REASONS for why each default.

    ``compute_efficiency`` and ``scaleout_gbps_per_chip`` are accepted as the former names of
    ``gemm_efficiency`` and ``scaleout_gbytes_per_s_per_chip`` (the latter was always GB/s).
    """

    gemm_efficiency: float = CALIBRATED_GEMM_EFFICIENCY
    grouped_gemm_relative: float = 1.0
    attention_relative: float = 1.0
    attention_gemm_efficiency: float | None = None
    memory_efficiency: float = 0.8
    collective_efficiency: float = 0.8
    collective_latency_us: float = 10.0
    overlap: float = 1.0
    critical_overlap: float = 0.0
    scaleout_gbytes_per_s_per_chip: float | None = None
    scaleup_domain: int | None = None
    max_tp: int = 8
    optimizer_state_bytes_per_param: float = 12.0
    straggler_cv: float = 0.01
    activation_bytes: float = 2.0
    compute_efficiency: InitVar[float | None] = None
    scaleout_gbps_per_chip: InitVar[float | None] = None

    def __post_init__(self, compute_efficiency: float | None, scaleout_gbps_per_chip: float | None) -> None:
        if compute_efficiency is not None:
            object.__setattr__(self, "gemm_efficiency", compute_efficiency)
        if scaleout_gbps_per_chip is not None:
            object.__setattr__(self, "scaleout_gbytes_per_s_per_chip", scaleout_gbps_per_chip)
        # the former names stay readable
        object.__setattr__(self, "compute_efficiency", self.gemm_efficiency)
        object.__setattr__(self, "scaleout_gbps_per_chip", self.scaleout_gbytes_per_s_per_chip)
        for name in ("gemm_efficiency", "memory_efficiency", "collective_efficiency"):
            if not 0 < getattr(self, name) <= 1:
                raise WorkbenchError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        for name in ("grouped_gemm_relative", "attention_relative"):
            if not 0 < getattr(self, name) <= 1:
                raise WorkbenchError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        if self.attention_gemm_efficiency is not None and not 0 < self.attention_gemm_efficiency <= 1:
            raise WorkbenchError(
                f"attention_gemm_efficiency must be in (0, 1], got {self.attention_gemm_efficiency}"
            )
        for name in ("overlap", "critical_overlap"):
            if not 0 <= getattr(self, name) <= 1:
                raise WorkbenchError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.scaleout_gbytes_per_s_per_chip is not None and self.scaleout_gbytes_per_s_per_chip <= 0:
            raise WorkbenchError("scaleout_gbytes_per_s_per_chip must be positive")
        if self.straggler_cv < 0:
            raise WorkbenchError("straggler_cv must be >= 0")

    def to_dict(self) -> dict:
        """Every field (the former names are not repeated)."""
        return asdict(self)

    def with_(self, **changes) -> Assumptions:
        """A copy with some fields changed."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return Assumptions(**values)
