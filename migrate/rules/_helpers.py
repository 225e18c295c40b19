"""Small local replacements that the rules write into a migrated file (once each, after its imports).

torch_xla scripts lean on utilities that have no torch counterpart with the same behaviour: the
runtime's rank and world size (known before any process group exists), collectives that work
without ``init_process_group``, ``xm.RateTracker``, ``xu.SampleGenerator``, the
``torch_xla.test.test_utils`` printers. Each replacement here is a few lines of plain torch, so a
migrated script imports no torch_xla. A rule asks for one with ``ctx.need_helper(name)``; the pass adds
its dependencies and imports, and a file that already defines the name keeps its own.

None of these sources may trigger a rule themselves (a test migrates each one and expects no change).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Helper:
    name: str
    source: str
    imports: tuple[str, ...] = ("torch",)
    requires: tuple[str, ...] = ()


_REGISTRY: dict[str, Helper] = {}


def _helper(
    name: str, source: str, imports: tuple[str, ...] = ("torch",), requires: tuple[str, ...] = ()
) -> str:
    _REGISTRY[name] = Helper(name, source, imports, requires)
    return name


DISTRIBUTED = _helper(
    "_tpu_distributed",
    '''def _tpu_distributed():
    """Added by tpu-migrate: whether collectives have peers to talk to.

    torch_xla's runtime always knew its replicas; with torchrun the default process group is created
    here on first use when WORLD_SIZE > 1 (call init_process_group yourself before to choose options).
    """
    if torch.distributed.is_initialized():
        return torch.distributed.get_world_size() > 1
    if int(os.environ.get("WORLD_SIZE", 1)) > 1:
        torch.distributed.init_process_group("tpu_dist")
        return True
    return False
''',
    ("os", "torch"),
)

RANK = _helper(
    "_tpu_rank",
    '''def _tpu_rank():
    """Added by tpu-migrate: the global rank, as xr.global_ordinal() (torchrun's RANK before a process
    group exists)."""
    if torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return int(os.environ.get("RANK", 0))
''',
    ("os", "torch"),
)

WORLD_SIZE = _helper(
    "_tpu_world_size",
    '''def _tpu_world_size():
    """Added by tpu-migrate: the number of processes, as xr.world_size() (torchrun's WORLD_SIZE before a
    process group exists)."""
    if torch.distributed.is_initialized():
        return torch.distributed.get_world_size()
    return int(os.environ.get("WORLD_SIZE", 1))
''',
    ("os", "torch"),
)

ALL_REDUCE_GRADIENTS = _helper(
    "_tpu_all_reduce_gradients",
    '''def _tpu_all_reduce_gradients(optimizer):
    """Added by tpu-migrate: average the gradients over the processes, as xm.reduce_gradients did
    (xm.optimizer_step = this + optimizer.step())."""
    if not _tpu_distributed():
        return
    world = torch.distributed.get_world_size()
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                torch.distributed.all_reduce(p.grad)
                p.grad.div_(world)
''',
    requires=(DISTRIBUTED,),
)

FETCH_GRADIENTS = _helper(
    "_tpu_fetch_gradients",
    '''def _tpu_fetch_gradients(optimizer):
    """Added by tpu-migrate: the gradients the optimizer will apply, as xm._fetch_gradients listed them."""
    return [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
''',
    (),
)

ALL_REDUCE = _helper(
    "_tpu_all_reduce",
    '''def _tpu_all_reduce(reduce_type, inputs, scale=1.0):
    """Added by tpu-migrate: xm.all_reduce. A tensor gives a reduced copy; a list of tensors is reduced
    in place and returned. `scale` multiplies the result; a single process returns the input as is."""
    op = {"sum": torch.distributed.ReduceOp.SUM, "mul": torch.distributed.ReduceOp.PRODUCT,
          "min": torch.distributed.ReduceOp.MIN, "max": torch.distributed.ReduceOp.MAX,
          "and": torch.distributed.ReduceOp.BAND, "or": torch.distributed.ReduceOp.BOR}[reduce_type]
    single = isinstance(inputs, torch.Tensor)
    tensors = [inputs.clone()] if single else list(inputs)
    if _tpu_distributed():
        for t in tensors:
            torch.distributed.all_reduce(t, op=op)
            if scale != 1.0:
                t.mul_(scale)
    return tensors[0] if single else inputs
''',
    requires=(DISTRIBUTED,),
)

_TO_CPU = "torch.utils._pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, data)"

MESH_REDUCE = _helper(
    "_tpu_mesh_reduce",
    f'''def _tpu_mesh_reduce(tag, data, reduce_fn):
    """Added by tpu-migrate: xm.mesh_reduce: `reduce_fn` over every process's copy of `data` (on the CPU)."""
    data = {_TO_CPU}
    if not _tpu_distributed():
        return reduce_fn([data])
    gathered = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, data)
    return reduce_fn(gathered)
''',
    requires=(DISTRIBUTED,),
)

RENDEZVOUS = _helper(
    "_tpu_rendezvous",
    '''def _tpu_rendezvous(tag, payload=b""):
    """Added by tpu-migrate: xm.rendezvous: wait for every process; returns each process's payload."""
    if not _tpu_distributed():
        return [payload]
    gathered = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, payload)
    return gathered
''',
    requires=(DISTRIBUTED,),
)

BROADCAST_MASTER_PARAM = _helper(
    "_tpu_broadcast_master_param",
    '''def _tpu_broadcast_master_param(model):
    """Added by tpu-migrate: copy rank 0's parameters and buffers to every process, as
    xm.broadcast_master_param did."""
    if _tpu_distributed():
        with torch.no_grad():
            for t in [*model.parameters(), *model.buffers()]:
                torch.distributed.broadcast(t, src=0)
''',
    requires=(DISTRIBUTED,),
)

RATE_TRACKER = _helper(
    "_TpuRateTracker",
    '''class _TpuRateTracker:
    """Added by tpu-migrate: xm.RateTracker: samples per second, smoothed between calls to rate()."""

    def __init__(self, smooth_factor=None):
        self._smooth_factor = 0.4 if smooth_factor is None else smooth_factor
        self._start_time = time.time()
        self._partial_time = self._start_time
        self._partial_count = 0.0
        self._partial_rate = None
        self._count = 0.0

    def add(self, count):
        self._count += count

    def rate(self):
        now = time.time()
        delta = now - self._partial_time
        if delta <= 0:
            return 0.0
        rate = self._count / delta
        if self._partial_rate is not None:
            rate = (1 - self._smooth_factor) * rate + self._smooth_factor * self._partial_rate
        self._partial_count += self._count
        self._count = 0.0
        self._partial_time = now
        self._partial_rate = rate
        return rate

    def global_rate(self):
        delta = time.time() - self._start_time
        return (self._partial_count + self._count) / delta if delta > 0 else 0.0
''',
    ("time",),
)

TIMING_EVENT = _helper(
    "_TpuTimingEvent",
    '''class _TpuTimingEvent:
    """Added by tpu-migrate: a timing event (torch.cuda.Event(enable_timing=True)): record() waits for the
    device and reads the clock, so elapsed_time(end) gives milliseconds as on CUDA."""

    def __init__(self, *args, **kwargs):
        self._time = None

    def record(self, stream=None):
        torch.accelerator.synchronize()
        self._time = time.perf_counter()

    def synchronize(self):
        torch.accelerator.synchronize()

    def wait(self, stream=None):
        return None

    def query(self):
        return True

    def elapsed_time(self, end_event):
        return (end_event._time - self._time) * 1000.0
''',
    ("time", "torch"),
)

RESTORE_LOCATION = _helper(
    "_tpu_restore_location",
    '''def _tpu_restore_location(storage, location):
    """Added by tpu-migrate: torch.load's placement on the GPU machine, for the TPU: storages saved on an
    accelerator (CUDA) load onto "tpu", those saved on the CPU stay there (a checkpoint holding CUDA tensors
    does not load where there is no CUDA; a tensor used as loaded must stay beside the model)."""
    import torch  # (here: a file may import torch only inside the functions that load)

    if location in ("cpu", "meta"):
        return None
    return torch.serialization.default_restore_location(storage, "tpu")
''',
    (),
)

MEMORY_SUMMARY = _helper(
    "_tpu_memory_summary",
    '''def _tpu_memory_summary(device=None, abbreviated=False):
    """Added by tpu-migrate: torch.cuda.memory_summary where a TPU is the accelerator. CUDA's table reads its
    caching allocator (without CUDA it raises), so this lists torch.accelerator.memory_stats() instead;
    elsewhere CUDA's summary as written."""
    if getattr(torch.accelerator.current_accelerator(check_available=True), "type", None) == "tpu":
        stats = torch.accelerator.memory_stats()
        return "\\n".join(f"{key}: {value}" for key, value in sorted(stats.items()))
    return getattr(torch, "cuda").memory_summary(device=device, abbreviated=abbreviated)
''',
)

MEMORY_STAT = _helper(
    "_tpu_memory_stat",
    '''def _tpu_memory_stat(name, *args):
    """Added by tpu-migrate: torch.accelerator's memory statistic `name` (TorchTPU answers them). Where no
    accelerator is present CUDA's returned 0 (memory_stats: an empty dict) and torch.accelerator's raise: the
    same answer as CUDA's there."""
    if torch.accelerator.current_accelerator(check_available=True) is None:
        return {} if name == "memory_stats" else 0
    return getattr(torch.accelerator, name)(*args)
''',
)

AUTOCAST = _helper(
    "_tpu_autocast",
    '''def _tpu_autocast(tpu_dtype=None, **kwargs):
    """Added by tpu-migrate: torch.autocast on "tpu" (in tpu_dtype where the migration chose one: bfloat16 for
    CUDA's float16). CUDA's autocast also ran where there was no GPU (it switched itself off); "tpu" names a
    device only where TorchTPU set one up, so elsewhere (a CPU-only or a Mac's run) this is CUDA's autocast as
    written, in its own dtype, which switches itself off again (and leaves a CPU autocast around it alone)."""
    if getattr(torch.accelerator.current_accelerator(check_available=True), "type", None) == "tpu":
        if tpu_dtype is not None:
            kwargs["dtype"] = tpu_dtype
        return torch.autocast("tpu", **kwargs)
    return torch.autocast("cuda", **kwargs)
''',
)

IMPORT_TIME_DEVICE = _helper(
    "_tpu_device",
    '''def _tpu_device(index=None):
    """Added by tpu-migrate: torch.device("cuda") built where any machine runs it (when the code is imported: a
    module constant, a class attribute, a parameter default; or compared with a device): "tpu" where TorchTPU set
    one up; elsewhere CUDA's as written, which any machine can build ("tpu" names a device type only where
    TorchTPU is loaded: building it would fail)."""
    on_tpu = getattr(torch.accelerator.current_accelerator(check_available=True), "type", None) == "tpu"
    return torch.device("tpu" if on_tpu else "cuda", index)
''',
)

SAFETENSORS_DEVICE = _helper(
    "_tpu_safetensors_device",
    '''def _tpu_safetensors_device(device):
    """Added by tpu-migrate: safetensors places the tensors it loads itself and knows no "tpu" device
    (SafetensorError: device tpu is invalid): they load on the CPU there, and load_state_dict / load_model
    copy them onto the model's device; any other device is handed on as before."""
    return "cpu" if str(device).startswith("tpu") else device
''',
    (),
)

CPU_COPY = _helper(
    "_tpu_cpu_copy",
    '''def _tpu_cpu_copy(module):
    """Added by tpu-migrate: torchsummary builds its example input on the CPU or CUDA only (its device is "cpu"
    or "cuda", and without CUDA it is the CPU): a module on "tpu" is summarized as a CPU copy (same layers, same
    parameter counts); any other module as it is."""
    import copy

    if any(p.device.type == "tpu" for p in module.parameters()):
        return copy.deepcopy(module).cpu()
    return module
''',
    (),
)

LEGACY_TENSOR = _helper(
    "_tpu_tensor_type",
    '''def _tpu_tensor_type(cpu_type):
    """Added by tpu-migrate: a CUDA tensor type called as a constructor (torch.cuda.FloatTensor(n) for a size,
    or (data) for values): the tensor the CPU type builds from the same arguments, moved to "tpu"."""

    def build(*args, **kwargs):
        kwargs.pop("device", None)  # (a CUDA ordinal: the CPU constructor refuses any device but the CPU)
        return cpu_type(*args, **kwargs).to("tpu")

    build.cpu_type = cpu_type  # (read by _tpu_as_type)
    return build
''',
    (),
)

AS_TYPE = _helper(
    "_tpu_as_type",
    '''def _tpu_as_type(tensor, tensor_type):
    """Added by tpu-migrate: tensor.type(T) where T may be a CUDA tensor type made a TPU constructor by
    _tpu_tensor_type: the tensor in that type's dtype on "tpu"; any other T as tensor.type(T) did."""
    cpu_type = getattr(tensor_type, "cpu_type", None)
    if cpu_type is None:
        return tensor.type(tensor_type)
    return tensor.to(device="tpu", dtype=cpu_type.dtype)
''',
    (),
)

DEVICE_RANDOM = _helper(
    "_tpu_random",
    '''def _tpu_random():
    """Added by tpu-migrate: the module whose manual_seed(_all) seeds the accelerator only, as CUDA's did:
    torch.tpu where TorchTPU is loaded; elsewhere torch.cuda as written, whose seeding is a no-op without a GPU
    (torch.tpu exists only where TorchTPU is loaded: naming it there would raise)."""
    return getattr(torch, "tpu", None) or torch.cuda
''',
)

#: A test for a TPU by name (not any accelerator: a Mac's mps is one too). One comparison, so it replaces a call
#: anywhere in an expression (`not ...`, `... and x`).
TPU_PRESENT = 'getattr(torch.accelerator.current_accelerator(check_available=True), "type", None) == "tpu"'
#: A test or name that picks another accelerator (`is_xpu_available()`, `torch.backends.mps.is_available()`).
OTHER_ACCELERATOR = re.compile(r"(?<![A-Za-z])(?:xpu|npu|hpu|mps|mlu|musa)(?![A-Za-z])", re.I)

AMP_DEVICE = _helper(
    "_tpu_amp_device",
    '''def _tpu_amp_device():
    """Added by tpu-migrate: the device type of this code's autocast: "tpu" where TorchTPU set one up; elsewhere
    CUDA's as written ("tpu" is no device type there: a decorator naming it fails at import, a query raises),
    whose autocast is off without a GPU, as it was."""
    on_tpu = getattr(torch.accelerator.current_accelerator(check_available=True), "type", None) == "tpu"
    return "tpu" if on_tpu else "cuda"
''',
)

BACKEND = _helper(
    "_tpu_backend",
    '''def _tpu_backend(backend):
    """Added by tpu-migrate: a process-group backend read from data (an option, a config, a dict): NCCL, the
    GPU's backend, becomes "tpu_dist"; any other name (gloo, mpi, another vendor's hccl) is kept; in a
    per-device string ("cuda:nccl,cpu:gloo") the GPU's entry becomes "tpu:tpu_dist" and the others are kept."""
    if backend is None:
        return backend
    if ":" in str(backend):
        entries = []
        for entry in str(backend).split(","):
            device, _, name = (part.strip().lower() for part in entry.partition(":"))
            entries.append("tpu:tpu_dist" if device == "cuda" or name == "nccl" else entry)
        return ",".join(dict.fromkeys(entries))
    return "tpu_dist" if str(backend).lower() == "nccl" else backend
''',
    (),
)

SAMPLE_GENERATOR = _helper(
    "_TpuSampleGenerator",
    '''class _TpuSampleGenerator:
    """Added by tpu-migrate: xu.SampleGenerator: yields the same `data` `sample_count` times (fake data)."""

    def __init__(self, data, sample_count):
        self.data = data
        self.sample_count = sample_count

    def __len__(self):
        return self.sample_count

    def __iter__(self):
        for _ in range(self.sample_count):
            yield self.data
''',
    (),
)

NOW = _helper(
    "_tpu_now",
    '''def _tpu_now(format="%H:%M:%S"):
    """Added by tpu-migrate: the wall-clock time as text, as torch_xla's test_utils.now()."""
    return time.strftime(format)
''',
    ("time",),
)

_DEVICE_SPEC = '"Device={}/{}".format(device, _tpu_rank())'

PRINT_TRAINING_UPDATE = _helper(
    "_tpu_print_training_update",
    f'''def _tpu_print_training_update(device, step, loss, rate, global_rate, epoch=None, summary_writer=None):
    """Added by tpu-migrate: the progress line of torch_xla's test_utils.print_training_update."""
    items = ["Training", {_DEVICE_SPEC}, None if epoch is None else "Epoch={{}}".format(epoch),
             "Step={{}}".format(step), "Loss={{:.5f}}".format(loss), "Rate={{:.2f}}".format(rate),
             "GlobalRate={{:.2f}}".format(global_rate), "Time={{}}".format(_tpu_now())]
    print("|", " ".join(i for i in items if i), flush=True)
    if summary_writer is not None:
        _tpu_write_to_summary(summary_writer, None, {{"examples/sec": rate, "average_examples/sec": global_rate}})
''',
    (),
    (RANK, NOW, "_tpu_write_to_summary"),
)

PRINT_TEST_UPDATE = _helper(
    "_tpu_print_test_update",
    f'''def _tpu_print_test_update(device, accuracy, epoch=None, step=None):
    """Added by tpu-migrate: the test line of torch_xla's test_utils.print_test_update."""
    items = ["Test", {_DEVICE_SPEC}, None if step is None else "Step={{}}".format(step),
             None if epoch is None else "Epoch={{}}".format(epoch),
             None if accuracy is None else "Accuracy={{:.2f}}".format(accuracy), "Time={{}}".format(_tpu_now())]
    print("|", " ".join(i for i in items if i), flush=True)
''',
    (),
    (RANK, NOW),
)

WRITE_TO_SUMMARY = _helper(
    "_tpu_write_to_summary",
    '''def _tpu_write_to_summary(summary_writer, global_step=None, dict_to_write=None, write_xla_metrics=False):
    """Added by tpu-migrate: scalars to a TensorBoard writer (None: nothing); there are no XLA metrics."""
    if summary_writer is None:
        return
    for k, v in (dict_to_write or {}).items():
        summary_writer.add_scalar(k, v, global_step)
''',
    (),
)

GET_SUMMARY_WRITER = _helper(
    "_tpu_get_summary_writer",
    '''def _tpu_get_summary_writer(logdir):
    """Added by tpu-migrate: a TensorBoard writer for `logdir`, or None without one."""
    if not logdir:
        return None
    from torch.utils.tensorboard import SummaryWriter  # lazy: optional dependency

    writer = SummaryWriter(log_dir=logdir)
    _tpu_write_to_summary(writer, 0, {"TensorboardStartTimestamp": time.time()})
    return writer
''',
    ("time",),
    (WRITE_TO_SUMMARY,),
)

CLOSE_SUMMARY_WRITER = _helper(
    "_tpu_close_summary_writer",
    '''def _tpu_close_summary_writer(summary_writer):
    """Added by tpu-migrate: flush and close a TensorBoard writer (None: nothing)."""
    if summary_writer is not None:
        summary_writer.flush()
        summary_writer.close()
''',
    (),
)

DEVICE_LOADER = _helper(
    "_TpuDeviceLoader",
    '''class _TpuDeviceLoader:
    """Added by tpu-migrate: moves each batch to `device`, as pl.MpDeviceLoader did."""

    def __init__(self, loader, device):
        self.loader = loader
        self.device = device

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        for batch in self.loader:
            yield torch.utils._pytree.tree_map(
                lambda t: t.to(self.device, non_blocking=True) if isinstance(t, torch.Tensor) else t, batch
            )
''',
)


def helper(name: str) -> Helper:
    return _REGISTRY[name]


def closure(names: set[str] | frozenset[str]) -> list[Helper]:
    """The helpers ``names`` and everything they use, in registry order (a stable file layout)."""
    todo, seen = list(names), set()
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(_REGISTRY[n].requires)
    return [h for n, h in _REGISTRY.items() if n in seen]


def all_helpers() -> list[Helper]:
    return list(_REGISTRY.values())
