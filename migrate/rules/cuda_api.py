"""``torch.cuda.*`` APIs and ``torch.backends.cudnn`` flags -> ``torch.accelerator`` and friends.

TorchTPU's own ``torch.tpu.is_available/device_count/synchronize/current_device/set_device`` raise
with torch >= 2.11, so the device-agnostic ``torch.accelerator`` API is the target.
"""

from __future__ import annotations

import libcst as cst

from ._util import arg, code, expr, kwarg, string_body
from .base import Context, Rule, register

_ACCELERATOR = {
    "is_available": "is_available",
    "device_count": "device_count",
    "synchronize": "synchronize",
    "current_device": "current_device_index",
    "set_device": "set_device_index",
    "current_stream": "current_stream",
    "set_stream": "set_stream",
}


@register
class CudaToAccelerator(Rule):
    code = "TPU201"
    name = "cuda-to-accelerator"
    family = "cuda_api"
    summary = "Rewrite torch.cuda.is_available/device_count/synchronize/current_device/set_device/... to torch.accelerator."
    rationale = ("torch.accelerator is the device-agnostic API (PyTorch >= 2.6) that pytorch/examples moved to; "
                 "TorchTPU's torch.tpu versions of these raise on torch >= 2.11. Note that is_available() is "
                 "true for any accelerator, and set_device_index raises if the ordinal is not the process's chip.")
    before = "import torch\n\nif torch.cuda.is_available():\n    n = torch.cuda.device_count()\n"
    after = "import torch\n\nif torch.accelerator.is_available():\n    n = torch.accelerator.device_count()\n"
    refs = frozenset(f"torch.cuda.{k}" for k in _ACCELERATOR)
    emits = tuple(f"torch.accelerator.{v}" for v in _ACCELERATOR.values())

    def ref(self, ctx: Context, orig, node, qname: str):
        new = f"torch.accelerator.{_ACCELERATOR[qname.rsplit('.', 1)[1]]}"
        ctx.report(orig, f"`{qname}` -> `{new}`", code=self.code)
        ctx.need_import("torch")
        return expr(new)


@register
class EmptyCache(Rule):
    code = "TPU202"
    name = "cuda-empty-cache"
    family = "cuda_api"
    summary = "Delete `torch.cuda.empty_cache()` statements."
    rationale = "TorchTPU has no caching-allocator API; the call has nothing to release."
    before = "import torch\n\ntorch.cuda.empty_cache()\nx = 1\n"
    after = "import torch\n\nx = 1\n"
    statements = frozenset({"torch.cuda.empty_cache"})

    def statement(self, ctx, orig, node, qname, call, target):
        if target is not None:
            return None
        ctx.report(orig, "removed `torch.cuda.empty_cache()` (no TPU cache API)", code=self.code)
        return cst.RemovalSentinel.REMOVE

    def call(self, ctx, orig, node, qname):
        ctx.report(orig, "`torch.cuda.empty_cache()` -> `None` (no TPU cache API)", code=self.code, outcome="warned")
        return expr("None")


@register
class CudaManualSeed(Rule):
    code = "TPU203"
    name = "cuda-manual-seed"
    family = "cuda_api"
    outcome = "warned"
    summary = "Rewrite torch.cuda.manual_seed(_all)(s) to torch.manual_seed(s)."
    rationale = "torch.manual_seed seeds every device, including 'tpu' (it also reseeds the CPU generator)."
    before = "import torch\n\ntorch.cuda.manual_seed_all(0)\n"
    after = "import torch\n\ntorch.manual_seed(0)\n"
    calls = frozenset({"torch.cuda.manual_seed", "torch.cuda.manual_seed_all"})
    emits = ("torch.manual_seed",)

    def call(self, ctx, orig, node, qname):
        ctx.report(orig, f"`{qname}` -> `torch.manual_seed` (seeds every device, the CPU included)",
                   code=self.code, outcome="warned")
        ctx.need_import("torch")
        return node.with_changes(func=expr("torch.manual_seed"))


_MEMORY = ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "reset_peak_memory_stats", "reset_max_memory_allocated", "mem_get_info", "memory_summary",
           "memory_stats", "memory_cached", "max_memory_cached", "reset_accumulated_memory_stats",
           "memory_snapshot", "caching_allocator_alloc", "set_per_process_memory_fraction")


@register
class CudaMemoryStats(Rule):
    code = "TPU204"
    name = "cuda-memory-stats"
    family = "cuda_api"
    outcome = "flagged"
    summary = "Flag torch.cuda memory statistics (memory_allocated, mem_get_info, ...)."
    rationale = ("TorchTPU 0.2.0 implements none of them (only get_device_properties().total_memory); "
                 "torch.accelerator.memory is upstream but not backed by TorchTPU.")
    before = "import torch\n\nprint(torch.cuda.max_memory_allocated())\n"
    after = ("import torch\n\n# TODO(tpu-migrate TPU204): `torch.cuda.max_memory_allocated` has no TorchTPU "
             "equivalent (no memory statistics); remove it or guard it by device type\n"
             "print(torch.cuda.max_memory_allocated())\n")
    refs = frozenset(f"torch.cuda.{n}" for n in _MEMORY)

    def ref(self, ctx, orig, node, qname):
        ctx.flag(orig, f"`{qname}` has no TorchTPU equivalent (no memory statistics); remove it or guard it "
                 "by device type", code=self.code)
        return None


@register
class CudaDeviceInfo(Rule):
    code = "TPU205"
    name = "cuda-device-info"
    family = "cuda_api"
    outcome = "warned"
    summary = "Rewrite torch.cuda.get_device_name/get_device_properties to torch.tpu; flag capability checks."
    rationale = ("torch.tpu.get_device_name/get_device_properties exist in TorchTPU 0.2.0; compute-capability "
                 "gates such as `>= (8, 0)` for bf16/tf32 have no TPU meaning.")
    before = "import torch\n\nname = torch.cuda.get_device_name(0)\n"
    after = "import torch\n\nname = torch.tpu.get_device_name(0)\n"
    refs = frozenset({"torch.cuda.get_device_name", "torch.cuda.get_device_properties",
                      "torch.cuda.get_device_capability", "torch.version.cuda", "torch.cuda.get_arch_list"})
    emits = ("torch.tpu.get_device_name", "torch.tpu.get_device_properties")

    def ref(self, ctx, orig, node, qname):
        last = qname.rsplit(".", 1)[1]
        if last in ("get_device_name", "get_device_properties"):
            ctx.report(orig, f"`{qname}` -> `torch.tpu.{last}` (raises where no TPU is present)",
                       code=self.code, outcome="warned")
            ctx.need_import("torch")
            return expr(f"torch.tpu.{last}")
        ctx.flag(orig, f"`{qname}` is a CUDA capability/version check; decide what the TPU path needs",
                 code=self.code)
        return None


@register
class Bf16Supported(Rule):
    code = "TPU206"
    name = "cuda-is-bf16-supported"
    family = "cuda_api"
    summary = "Rewrite torch.cuda.is_bf16_supported() to True."
    rationale = "Every TPU generation supports bfloat16; there is no torch.tpu.is_bf16_supported."
    before = 'import torch\n\ndtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"\n'
    after = 'import torch\n\ndtype = "bfloat16" if True else "float16"\n'
    calls = frozenset({"torch.cuda.is_bf16_supported"})

    def call(self, ctx, orig, node, qname):
        ctx.report(orig, "`torch.cuda.is_bf16_supported()` -> `True`", code=self.code)
        return expr("True")


@register
class CudaEventStream(Rule):
    code = "TPU207"
    name = "cuda-event-stream"
    family = "cuda_api"
    outcome = "warned"
    summary = "Rewrite torch.cuda.Event/Stream to torch.Event/torch.Stream; flag torch.cuda.stream(...)."
    rationale = ("The generic classes follow the current accelerator; TorchTPU's streams and events are "
                 "placeholders, so timings measured with them must be checked.")
    before = "import torch\n\nstart = torch.cuda.Event(enable_timing=True)\n"
    after = "import torch\n\nstart = torch.Event(enable_timing=True)\n"
    refs = frozenset({"torch.cuda.Event", "torch.cuda.Stream", "torch.cuda.stream"})
    emits = ("torch.Event", "torch.Stream")

    def ref(self, ctx, orig, node, qname):
        last = qname.rsplit(".", 1)[1]
        if last == "stream":
            ctx.flag(orig, "`torch.cuda.stream(...)`: TorchTPU streams are placeholders; drop the context or "
                     "use torch.Stream", code=self.code)
            return None
        ctx.report(orig, f"`{qname}` -> `torch.{last}` (placeholder on TorchTPU: check timings)",
                   code=self.code, outcome="warned")
        ctx.need_import("torch")
        return expr(f"torch.{last}")


_TENSOR_TYPES = ("FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor",
                 "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor")


@register
class CudaTensorType(Rule):
    code = "TPU208"
    name = "cuda-tensor-type"
    family = "cuda_api"
    outcome = "warned"
    summary = "Rewrite set_default_tensor_type('torch.cuda.FloatTensor') to torch.set_default_device('tpu'); flag torch.cuda.*Tensor."
    rationale = ("set_default_tensor_type is deprecated; the default device and dtype are set separately. "
                 "Typed CUDA tensor constructors have no TPU counterpart.")
    before = "import torch\n\ntorch.set_default_tensor_type('torch.cuda.FloatTensor')\n"
    after = "import torch\n\ntorch.set_default_device('tpu')\n"
    calls = frozenset({"torch.set_default_tensor_type"})
    refs = frozenset(f"torch.cuda.{t}" for t in _TENSOR_TYPES)
    node_types = (cst.Call,)
    emits = ("torch.set_default_device",)

    def visit_node(self, ctx, node):
        if ctx.qname(node.func) == "torch.set_default_tensor_type":
            ctx.skip_inside(node)

    def call(self, ctx, orig, node, qname):
        a = arg(orig, 0, "t")
        if a is None:
            return None
        body = string_body(a.value)
        text = body if body is not None else (ctx.qname(a.value) or "")
        if not text.startswith("torch.cuda."):
            return None
        if text != "torch.cuda.FloatTensor":
            ctx.flag(orig, f"default tensor type `{text}`: use torch.set_default_device('tpu') and "
                     "torch.set_default_dtype(...)", code=self.code)
            return None
        ctx.report(orig, "set_default_tensor_type(torch.cuda.FloatTensor) -> set_default_device('tpu')",
                   code=self.code, outcome="warned")
        return node.with_changes(func=expr("torch.set_default_device"), args=[cst.Arg(cst.SimpleString("'tpu'"))])

    def ref(self, ctx, orig, node, qname):
        ctx.flag(orig, f"`{qname}`: create the tensor with device='tpu' and an explicit dtype", code=self.code)
        return None


_ENV = {"CUDA_VISIBLE_DEVICES": "TPU chips are selected with TPU_VISIBLE_CHIPS",
        "CUDA_LAUNCH_BLOCKING": "use TorchTPU's Debug Eager mode (TORCH_TPU_LAUNCH_BLOCKING=1)",
        "CUDA_DEVICE_ORDER": "no TPU equivalent",
        "NCCL_DEBUG": "no TPU equivalent", "NCCL_SOCKET_IFNAME": "no TPU equivalent"}


@register
class CudaEnvVar(Rule):
    code = "TPU209"
    name = "cuda-env-var"
    family = "cuda_api"
    outcome = "flagged"
    summary = "Flag CUDA/NCCL environment variables (CUDA_VISIBLE_DEVICES, CUDA_LAUNCH_BLOCKING, NCCL_*)."
    rationale = "TorchTPU reads other variables (TPU_VISIBLE_CHIPS, TORCH_TPU_LAUNCH_BLOCKING); these do nothing."
    before = 'import os\n\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'
    after = ('import os\n\n# TODO(tpu-migrate TPU209): CUDA_VISIBLE_DEVICES has no effect on TPU: TPU chips are '
             'selected with TPU_VISIBLE_CHIPS\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n')
    node_types = (cst.SimpleString,)

    def leave_node(self, ctx, orig, node):
        body = string_body(orig)
        if body in _ENV:
            ctx.flag(orig, f"{body} has no effect on TPU: {_ENV[body]}", code=self.code)
        return None


@register
class CudaGraphsNvtx(Rule):
    code = "TPU210"
    name = "cuda-graphs-nvtx-profiler"
    family = "cuda_api"
    outcome = "flagged"
    summary = "Flag CUDA graphs, NVTX ranges and ProfilerActivity.CUDA."
    rationale = "Use torch.profiler with the TPU Kineto backend; XLA already compiles graphs, there is no CUDA graph."
    before = "import torch\n\ng = torch.cuda.CUDAGraph()\n"
    after = ("import torch\n\n# TODO(tpu-migrate TPU210): `torch.cuda.CUDAGraph` is CUDA-only; use torch.profiler "
             "(TPU Kineto backend) or torch.compile instead\ng = torch.cuda.CUDAGraph()\n")
    refs = frozenset({"torch.cuda.CUDAGraph", "torch.cuda.graph", "torch.cuda.make_graphed_callables",
                      "torch.profiler.ProfilerActivity.CUDA", "torch.autograd.profiler.emit_nvtx"})
    ref_prefixes = ("torch.cuda.nvtx", "torch.cuda.graphs")

    def ref(self, ctx, orig, node, qname):
        ctx.flag(orig, f"`{qname}` is CUDA-only; use torch.profiler (TPU Kineto backend) or torch.compile instead",
                 code=self.code)
        return None


_KERNEL_MODULES = ("triton", "apex", "bitsandbytes", "flash_attn", "xformers", "cupy", "pycuda", "numba.cuda",
                   "transformer_engine")


@register
class CustomKernels(Rule):
    code = "TPU211"
    name = "custom-cuda-kernels"
    family = "cuda_api"
    outcome = "flagged"
    summary = "Flag custom CUDA kernels: CUDAExtension, triton, apex, bitsandbytes, flash_attn, xformers ..."
    rationale = "These run CUDA code; on TPU write the kernel in JAX/Pallas (torch.tpu.pallas.jax_op) or use torch ops."
    before = "import triton\n"
    after = ("# TODO(tpu-migrate TPU211): `triton` runs CUDA kernels; port to torch ops or a Pallas kernel "
             "(torch.tpu.pallas.jax_op)\nimport triton\n")
    refs = frozenset({"torch.utils.cpp_extension.CUDAExtension"})
    node_types = (cst.Import, cst.ImportFrom)

    def _flag(self, ctx, node, mod: str):
        if mod.split(".")[0] in _KERNEL_MODULES or any(mod.startswith(m + ".") or mod == m for m in _KERNEL_MODULES):
            ctx.flag(node, f"`{mod}` runs CUDA kernels; port to torch ops or a Pallas kernel (torch.tpu.pallas.jax_op)",
                     code=self.code)

    def leave_node(self, ctx, orig, node):
        if isinstance(orig, cst.Import):
            for alias in orig.names:
                self._flag(ctx, orig, cst.helpers.get_full_name_for_node(alias.name) or "")
        elif isinstance(orig, cst.ImportFrom) and orig.module is not None and not orig.relative:
            self._flag(ctx, orig, cst.helpers.get_full_name_for_node(orig.module) or "")
        return None

    def ref(self, ctx, orig, node, qname):
        ctx.flag(orig, "`CUDAExtension` builds CUDA kernels; port to torch ops or a Pallas kernel", code=self.code)
        return None


@register
class FusedOptimizer(Rule):
    code = "TPU212"
    name = "fused-optimizer"
    family = "cuda_api"
    outcome = "flagged"
    summary = "Flag `fused=`/`foreach=` on torch.optim optimizers (often gated on device_type == 'cuda')."
    rationale = ("TorchTPU ships fused Adam/AdamW kernels but other backends may not implement the fused "
                 "path; check that the option is supported on the target device.")
    before = ('import torch\n\nuse_fused = device_type == "cuda"\n'
              "opt = torch.optim.AdamW(params, lr=1e-3, fused=use_fused)\n")
    after = ('import torch\n\nuse_fused = device_type == "cuda"\n'
             "# TODO(tpu-migrate TPU212): check that `fused=` is supported for 'tpu' (the condition "
             "was probably written for CUDA)\nopt = torch.optim.AdamW(params, lr=1e-3, fused=use_fused)\n")
    calls = frozenset(f"torch.optim.{o}" for o in ("Adam", "AdamW", "SGD", "Adagrad", "Adamax", "NAdam",
                                                   "RAdam", "RMSprop", "Rprop", "ASGD"))

    def call(self, ctx, orig, node, qname):
        fused = kwarg(orig, "fused")
        if fused is not None and not (isinstance(fused.value, cst.Name) and fused.value.value in ("False", "None")):
            ctx.flag(orig, "check that `fused=` is supported for 'tpu' (the condition was probably written for "
                     "CUDA)", code=self.code)
        return None


@register
class CudnnFlags(Rule):
    code = "TPU213"
    name = "cudnn-flags"
    family = "cuda_api"
    summary = "Delete assignments to torch.backends.cudnn.benchmark/deterministic/enabled."
    rationale = ("They are no-ops off CUDA. For determinism use torch.use_deterministic_algorithms, which "
                 "is device-agnostic (a warning says so when `deterministic` is removed).")
    before = "import torch\n\ntorch.backends.cudnn.benchmark = True\nx = 1\n"
    after = "import torch\n\nx = 1\n"
    statements = frozenset(f"torch.backends.cudnn.{n}" for n in ("benchmark", "deterministic", "enabled"))

    def statement(self, ctx, orig, node, qname, call, target):
        if target is None or call is not None:
            return None
        if qname.endswith("deterministic"):
            ctx.report(orig, "removed `torch.backends.cudnn.deterministic` (no-op on TPU); consider "
                       "torch.use_deterministic_algorithms", code=self.code, outcome="warned")
        else:
            ctx.report(orig, f"removed `{qname}` assignment (no-op on TPU)", code=self.code)
        return cst.RemovalSentinel.REMOVE

    def call(self, ctx, orig, node, qname):
        return None


@register
class Tf32Flags(Rule):
    code = "TPU214"
    name = "tf32-to-matmul-precision"
    family = "cuda_api"
    summary = "Rewrite allow_tf32 assignments to torch.set_float32_matmul_precision('high'|'highest')."
    rationale = ("TF32 intent maps to matmul precision; TorchTPU maps set_float32_matmul_precision onto its "
                 "DEFAULT/HIGH/HIGHEST precision (f32 matmuls default to bf16 passes).")
    before = "import torch\n\ntorch.backends.cuda.matmul.allow_tf32 = True\n"
    after = 'import torch\n\ntorch.set_float32_matmul_precision("high")\n'
    statements = frozenset({"torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32"})
    emits = ("torch.set_float32_matmul_precision",)

    def statement(self, ctx, orig, node, qname, call, target):
        small = node.body[0]
        if not isinstance(small, cst.Assign) or call is not None:
            return None
        v = small.value
        if isinstance(v, cst.Name) and v.value in ("True", "False"):
            value = '"high"' if v.value == "True" else '"highest"'
        else:
            value = f'"high" if {code(v)} else "highest"'
        prev = ctx.previous_statement(orig)
        literal = isinstance(v, cst.Name)  # (a name, not an expression that may have side effects)
        repeated = literal and prev is not None and ctx.scratch.get(self.code) == (id(prev), value)
        ctx.scratch[self.code] = (id(orig), value)
        if repeated:  # matmul and cudnn flags side by side: one precision line says it
            ctx.report(orig, f"`{qname} = ...` removed: the line above already sets the same "
                       "torch.set_float32_matmul_precision", code=self.code)
            return cst.RemovalSentinel.REMOVE
        ctx.report(orig, f"`{qname} = ...` -> torch.set_float32_matmul_precision(...)", code=self.code)
        ctx.need_import("torch")
        return [cst.SimpleStatementLine([cst.Expr(expr(f"torch.set_float32_matmul_precision({value})"))])]

    def call(self, ctx, orig, node, qname):
        return None


@register
class SdpKernel(Rule):
    code = "TPU215"
    name = "cuda-sdp-backends"
    family = "cuda_api"
    outcome = "flagged"
    summary = "Flag torch.backends.cuda SDPA backend switches (sdp_kernel, enable_flash_sdp, ...)."
    rationale = "They select CUDA attention kernels; on TPU use F.scaled_dot_product_attention or torch.tpu.ops.splash_sdpa."
    before = "import torch\n\ntorch.backends.cuda.enable_flash_sdp(True)\n"
    after = ("import torch\n\n# TODO(tpu-migrate TPU215): `torch.backends.cuda.enable_flash_sdp` selects CUDA "
             "attention kernels; remove it (TPU: torch.tpu.ops.splash_sdpa)\n"
             "torch.backends.cuda.enable_flash_sdp(True)\n")
    refs = frozenset({"torch.backends.cuda.sdp_kernel", "torch.backends.cuda.enable_flash_sdp",
                      "torch.backends.cuda.enable_mem_efficient_sdp", "torch.backends.cuda.enable_math_sdp",
                      "torch.backends.cuda.enable_cudnn_sdp"})

    def ref(self, ctx, orig, node, qname):
        ctx.flag(orig, f"`{qname}` selects CUDA attention kernels; remove it (TPU: torch.tpu.ops.splash_sdpa)",
                 code=self.code)
        return None


@register
class UnknownCuda(Rule):
    code = "TPU299"
    name = "unknown-torch-cuda"
    family = "cuda_api"
    outcome = "flagged"
    summary = "Flag any other torch.cuda.* API (never guessed)."
    rationale = "An API with no known TorchTPU counterpart is left for a human instead of being mapped by analogy."
    before = "import torch\n\ntorch.cuda.ipc_collect()\n"
    after = ("import torch\n\n# TODO(tpu-migrate TPU299): `torch.cuda.ipc_collect` has no known TorchTPU "
             "equivalent; port by hand\ntorch.cuda.ipc_collect()\n")
    ref_prefixes = ("torch.cuda",)

    def ref(self, ctx, orig, node, qname):
        if ctx.is_known(qname, ctx.is_called(orig)):
            return None
        if ctx.is_known(qname, True):
            ctx.flag(orig, f"`{qname}` used as a value; rewrite its uses by hand", code=self.code)
            return None
        ctx.flag(orig, f"`{qname}` has no known TorchTPU equivalent; port by hand", code=self.code)
        return None
