"""The text test run before parsing: a file (or a statement, see migrate.partial) that matches none of
these cannot match a rule."""

from __future__ import annotations

import re

from .project import current

#: Cheap text test run before parsing: a file that matches none of these cannot match a rule. Written
#: against code forms, not prose: "CUDA" in a docstring does not make a file worth parsing. Each regex
#: comes with a word that every one of its matches contains: a regex runs only over a file that holds its
#: word (a plain substring test, C speed), so common words ("device") cost one cheap search, not a scan
#: with every alternative (a property test checks the pairing).
TRIGGERS: tuple[tuple[str, str], ...] = (
    ("cuda", r"""['"]cuda(?::[^'"\n]*)?['"]"""),
    ("xla", r"""['"]xla(?::[^'"\n]*)?['"]"""),
    ("nccl", r"""['"]nccl(?::[^'"\n]*)?['"]"""),
    ("nccl", r"cuda:nccl"),  # a backend per device type: "cpu:gloo,cuda:nccl"
    ("cuda", r"""f['"]cuda:"""),
    ("xla", r"""f['"]xla:"""),
    ("cuda", r"\bcuda\s*[.(]"),
    ("cuda", r"\.cuda\b"),
    ("cuda", r"\bis_cuda\b"),
    ("cuda", r"\bis_torch_cuda_available\b"),  # transformers' name for torch.cuda.is_available
    ("bf16", r"\bis_torch_bf16_gpu_available\b"),  # and for torch.cuda.is_bf16_supported
    ("xla", "torch_xla"),
    ("_C._cu", r"\b_C\._cu(?:da|dnn)"),  # torch's private CUDA bindings: torch._C._cuda_getDevice
    ("_C._nccl", r"_C\._nccl"),
    ("cudnn", "cudnn"),
    *((w.replace("PT_", ""), rf"\b{w}_[A-Z_]+") for w in ("CUDA", "NCCL", "XLA", "XRT", "PJRT", "PT_XLA")),
    ("TPU_", "TPU_NUM_DEVICES"),
    ("TPU_", "TPU_PROCESS_ADDRESSES"),
    *(
        (w, rf"\b{w}\b")
        for w in ("triton", "apex", "flash_attn", "bitsandbytes", "xformers", "cupy", "transformer_engine")
    ),
    ("cuda", r"\bpycuda\b"),
    ("xla", "openxla"),
    ("GradScaler", "GradScaler"),
    ("autocast", "autocast"),
    ("ProfilerActivity", "ProfilerActivity"),
    ("emit_nvtx", "emit_nvtx"),
    ("CUDA", "CUDAExtension"),
    ("cpp_extension", "cpp_extension"),  # load(sources=[... .cu]) builds a CUDA kernel
    ("CUDA", "CUDAGraph"),
    ("tpu-migrate", "tpu-migrate"),
    # ops with CPU and CUDA kernels only, called in a file with no device word (DETA's transformer calls
    # detectron2's batched_nms on every forward): rules/cuda_api.py CPU_CUDA_OPS flags the call
    ("nms", r"\b(?:batched_)?nms(?:_rotated)?\s*\("),
    ("roi_", r"\b(?:ps_)?roi_(?:align|pool)(?:_rotated)?\s*\("),
    ("ROIAlign", r"\bROIAlign(?:Rotated)?\s*\("),
    ("RoI", r"\b(?:PS)?RoI(?:Align|Pool)\s*\("),
    ("eform", r"\b(?:Modulated)?[Dd]eform_?[Cc]onv(?:2d)?\s*\("),
    # framework knobs (rules/frameworks.py)
    ("accelerator", r"""\baccelerator\s*=\s*['"]"""),
    ("accelerator", r"\baccelerator=[A-Za-z_]"),  # accelerator=args.accelerator (a run-time choice)
    ("init_process_group", r"init_process_group\((?:backend=)?[A-Za-z_]"),  # a backend read from data
    ("strategy", r"""\bstrategy\s*=\s*['"](?:xla|tpu|single_)"""),
    ("tpu_", r"\btpu_(?:num_)?cores\b"),
    ("tpu_", "tpu_metrics_debug"),
    ("gpus", r"\bgpus\s*="),
    ("XLA", r"XLA\w*(?:Strategy|Accelerator|Precision|CheckpointIO|Profiler|Environment)"),
    ("TPU", r"TPU\w*(?:Strategy|Accelerator|Plugin)"),
    ("Device", r"\bDevice[TG]PU\b"),
    ("composer", r"\bcomposer\b"),
    ("--tpu", "--tpu"),  # (not device="tpu": migrated code is full of it)
    ("device_map", r"""device_map['"]?\s*\]?\s*=\s*['"](?:auto|balanced|sequential)"""),  # TPU915
    # another library's CUDA build or provider named as data (rules/cuda_api.py CustomKernels, _CUDA_BUILD)
    ("-gpu", r"(?:onnxruntime|paddlepaddle|tensorflow|faiss|mxnet|jaxlib|cupy)-gpu\b"),
    ("ExecutionProvider", r"(?:CUDA|Tensorrt|TensorRT)ExecutionProvider"),
    # CUDA-only stacks and kernel registrations (rules/cuda_api.py)
    *(
        (w, rf"\b{w}\b")
        for w in ("tensorrt", "deep_ep", "pynvml", "flashinfer", "cutlass", "mamba_ssm", "liger_kernel")
    ),
    ("cuda", r"\bfrom\s+cuda\b"),
    # NVIDIA serving stacks and CPU-or-CUDA libraries imported by name (rules/cuda_api.py KERNEL_MODULES): a file
    # holding only the import (wenet's stateful Riva decoder) still gets its TODO
    *(
        (w, rf"(?:^|\n)[ \t]*(?:import|from)[ \t]+{w}\b")
        for w in ("riva", "k2", "polygraphy", "tensorrt_llm", "isaacgym")
    ),
    ("triton_python", r"\btriton_python_backend_utils\b"),
    ("load_in_", r"\bload_in_[48]bit\s*=\s*(?!False\b)"),  # bitsandbytes through transformers (TPU211)
    ("fairscale", r"\bfairscale\.nn\.data_parallel\b"),
    ("deepspeed4science", r"\bdeepspeed4science\b"),
    ("fbgemm", r"\bfbgemm_gpu\b"),
    ("torchrec", r"\btorchrec\.distributed\b"),
    # engines that pick their own device (rules/frameworks.py EngineOwnDevice, TPU916)
    ("deepspeed", r"\bdeepspeed\.init(?:ialize|_inference)\b"),
    ("SyncBatchNorm", r"\bSyncBatchNorm\b"),  # rules/distributed.py SyncBatchNormFlag, TPU408
    ("Accelerator", r"\bAccelerator\s*\("),
    ("nvidia", r"\bimport\s+nvidia\b|\bfrom\s+nvidia\b|nvidia-smi"),
    ("flash_attention_", r"flash_attention_[23]"),
    ("CUDA", r"""['"](?:Autograd|Sparse|Quantized)?CUDA['"]"""),
    # one process over several CUDA devices (rules/distributed.py DataParallelFlag, TPU407)
    ("DataParallel", r"\bDataParallel\b"),
    # safetensors placing a device held in a variable (rules/foreign_devices.py, TPU109)
    ("load_", r"\bload_(?:file|model)\([^)\n]*\bdevice\s*=\s*[A-Za-z_]"),
    ("data_parallel", r"\bdata_parallel\b"),
)
PREFILTER: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (word, re.compile("|".join(rx for w, rx in TRIGGERS if w == word)))
    for word in dict.fromkeys(word for word, _ in TRIGGERS)
)


def needs_parse(source: str) -> bool:
    return any(
        word in source and regex.search(source) is not None for word, regex in PREFILTER
    ) or names_project_kernel(source)


def names_project_kernel(source: str) -> bool:
    """``source`` names a module the run's project builds from CUDA sources (migrate.project's
    ``cuda_extensions``: ``import MultiScaleDeformableAttention as MSDA`` holds no trigger word)."""
    return any(name in source for name in current().cuda_extensions)
