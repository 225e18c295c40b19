"""Wrong rewrites left after the sixth reading of held-out check 28 (benchmarks/migrate_corpus_heldout28.txt, tool
657ec6d), each as a class in its own words, each asserting what the tool must (not) do."""

from __future__ import annotations

from migrate_helpers import codes, run, write_files, write_tree

# --- detectron2 is judged by what a module takes from it (detrex): its structures, configs, checkpointer, layers
# and backbones are plain torch; its detectors (build_model, DefaultPredictor, R-CNN heads) place a model by
# detectron2's own cfg.MODEL.DEVICE and run NMS / ROIAlign (CPU and CUDA kernels only) inside; its ops called by
# the project's code are flagged at the call, as torchvision's are. Judged as one package, every detrex model
# module was left as written on 'cuda' while its criterion and configs moved to 'tpu' ---


def _code_lines(src: str) -> str:
    return "\n".join(ln for ln in src.splitlines() if "TODO" not in ln)


def test_a_module_taking_only_detectron2_structures_is_migrated():
    src = (
        "import torch\nfrom detectron2.structures import Boxes, ImageList, Instances\n"
        "from detectron2.layers import ShapeSpec\nfrom detectron2.modeling import detector_postprocess\n\n\n"
        "def prepare_for_cdn(targets):\n    return torch.cat([t['labels'] for t in targets]).cuda()\n"
    )
    res = run(src)
    assert '.to("tpu")' in res.new_source and "TPU211" not in codes(res)


def test_a_module_building_a_detectron2_detector_is_flagged_and_left_as_written():
    for imp in (
        "from detectron2.modeling import build_model\n",
        "from detectron2.engine import DefaultTrainer\n",
        "from detectron2.modeling.proposal_generator import RPN\n",
    ):
        res = run(f"import torch\n{imp}\n\ndef f(x):\n    return x.cuda()\n")
        assert ".cuda()" in _code_lines(res.new_source) and "tpu" not in _code_lines(res.new_source), imp
        assert "TPU211" in codes(res), imp


def test_a_call_of_a_detectron2_op_is_flagged_where_it_is_called():
    # DETA's transformer calls batched_nms (torchvision::nms underneath: CPU and CUDA kernels only)
    for imp, call in (
        ("from detectron2.layers import ShapeSpec, batched_nms", "batched_nms"),
        ("from detectron2.layers.nms import batched_nms", "batched_nms"),
        ("from detectron2.layers import ROIAlign", "ROIAlign"),
    ):
        src = f"import torch\n{imp}\n\n\ndef f(b, s, i):\n    b = b.cuda()\n    return {call}(b, s, i, 0.7)\n"
        res = run(src)
        msgs = [d.message for d in res.diagnostics if d.code == "TPU211"]
        assert len(msgs) == 1 and f".{call}` has CPU and CUDA kernels only" in msgs[0], imp
        assert '.to("tpu")' in res.new_source, imp


def test_a_config_reaching_a_module_built_on_a_detectron2_detector_keeps_its_device(tmp_path):
    # d2go's runners build R-CNN models through detectron2's build_model (placed by cfg.MODEL.DEVICE); DINO's
    # model is built from plain structures. The first program stays 'cuda', the second moves.
    files = {
        "projects/__init__.py": "",
        "projects/rcnn/__init__.py": "",
        "projects/rcnn/modeling.py": (
            "import torch\nfrom detectron2.modeling import build_model\n\n\n"
            "def make(cfg, device='cuda'):\n    return build_model(cfg).to(device)\n"
        ),
        "projects/rcnn/config.py": (
            "from projects.rcnn.modeling import make\n\nmodel = dict(fn=make, device='cuda')\n"
        ),
        "projects/dino/__init__.py": "",
        "projects/dino/modeling.py": (
            "import torch\nfrom detectron2.structures import Boxes\n\n\n"
            "class DINO(torch.nn.Module):\n    def __init__(self, device='cuda'):\n        super().__init__()\n"
            "        self.device = device\n"
        ),
        "projects/dino/config.py": (
            "from projects.dino.modeling import DINO\n\nmodel = dict(cls=DINO, device='cuda')\n"
        ),
    }
    write_files(tmp_path, files)
    out = write_tree(tmp_path)
    assert "device='cuda'" in out["projects/rcnn/config.py"] and "TPU211" in out["projects/rcnn/config.py"]
    assert "device='cuda'" in out["projects/rcnn/modeling.py"]
    assert "device='tpu'" in out["projects/dino/config.py"]
    assert "device='tpu'" in out["projects/dino/modeling.py"]


# --- the other marks of a module's CUDA gate (axolotl's ScatterMoE int64 test: `pytestmark = [skipif(not
# torch.cuda.is_available()), skipif(torch.cuda.is_available() and total_memory < 24e9)]`): the first mark was kept
# as CUDA's, the VRAM guard beside it was renamed to torch.tpu, which a CUDA host lacks at collection ---


def test_every_mark_of_a_kept_module_gate_stays_cudas():
    src = (
        "import pytest\nimport torch\n\npytestmark = [\n"
        "    pytest.mark.skipif(not torch.cuda.is_available(), reason='CUDA required'),\n"
        "    pytest.mark.skipif(\n        torch.cuda.is_available()\n"
        "        and torch.cuda.get_device_properties(0).total_memory < 24e9,\n        reason='VRAM',\n    ),\n]\n\n\n"
        "def test_big():\n    x = torch.ones(2, device='cuda')\n    assert x.sum() == 2\n"
    )
    res = run(src)
    assert "torch.tpu" not in res.new_source and "torch.accelerator" not in res.new_source
    assert "torch.cuda.get_device_properties(0).total_memory" in res.new_source
    assert codes(res).count("TPU201") == 1


# --- a function whose name mentions CUDA is not a compiled CUDA extension (detectron2's `retry_if_cuda_oom`, which
# Mask2Former's model imports: its modules were left as written as if it were `wkv_cuda`) ---


def test_a_function_named_for_cuda_oom_is_not_a_cuda_extension(tmp_path):
    model = (
        "import torch\nfrom detectron2.utils.memory import retry_if_cuda_oom\n\n\n"
        "def f(x):\n    return retry_if_cuda_oom(torch.sigmoid)(x.cuda())\n"
    )
    write_files(tmp_path, {"proj/setup.py": "", "proj/model.py": model})
    out = write_tree(tmp_path)["proj/model.py"]
    assert '.to("tpu")' in out and "TPU211" not in out


# --- an import of a project module deeper than four dotted parts (axolotl's
# `axolotl.integrations.kernels.libs.scattermoe_lora.parallel_linear_lora`): the project scan did not link it, so a
# benchmark of Triton kernels was migrated without a word about them ---


def test_an_import_deeper_than_four_parts_links_to_the_project_file(tmp_path):
    pkg = "proj/src/pkg"
    files = {f"{pkg}/{d}__init__.py": "" for d in ("", "a/", "a/b/", "a/b/c/")}
    files[f"{pkg}/a/b/c/ops.py"] = "import torch\nimport triton\n\n\ndef f(x):\n    return x\n"
    files["proj/setup.py"] = ""
    files["proj/bench.py"] = "import torch\nfrom pkg.a.b.c.ops import f\n\nDEVICE = 'cuda'\n"
    write_files(tmp_path, files)
    out = write_tree(tmp_path)["proj/bench.py"]
    assert "built on `triton`" in out


# --- detectron2's `cfg.MODEL.DEVICE` (d2go's distributed launch and QAT calibration: `model.to(cfg.MODEL.DEVICE)`,
# `if cfg.MODEL.DEVICE == "cuda" and not torch.cuda.is_available()`): the device of a detector built by
# detectron2's build_model; rewritten, the helpers of a runner left on 'cuda' moved to 'tpu' ---


def test_a_file_using_detectron2s_model_device_is_left_as_written():
    src = (
        "import torch\nimport detectron2.utils.comm as comm\n\n\n"
        "def maybe_cpu(cfg):\n    if cfg.MODEL.DEVICE == 'cuda' and not torch.cuda.is_available():\n"
        "        cfg.MODEL.DEVICE = 'cpu'\n\n\ndef calibrate(model, cfg):\n    model.to('cuda')\n"
        "    return model.to(cfg.MODEL.DEVICE)\n"
    )
    res = run(src)
    assert "tpu" not in _code_lines(res.new_source) and "torch.accelerator" not in res.new_source
    msgs = [d.message for d in res.diagnostics if d.code == "TPU211"]
    assert len(msgs) == 1 and "`MODEL.DEVICE`" in msgs[0]


def test_a_model_device_key_without_detectron2_is_the_programs_own():
    src = "import torch\n\n\ndef place(model, cfg):\n    cfg.MODEL.DEVICE = 'cuda'\n    return model.cuda()\n"
    assert '.to("tpu")' in run(src).new_source


# --- an op with CPU and CUDA kernels only, called in a file without any device word (DETA's deformable
# transformer calls detectron2's batched_nms on every forward): the prefilter skipped the file, so the call that
# runs on 'tpu' tensors went unflagged while its twin elsewhere was flagged ---


def test_a_cpu_cuda_op_in_a_file_without_device_words_is_flagged():
    for imp, call in (
        ("from detectron2.layers.nms import batched_nms", "batched_nms(b, s, i, 0.9)"),
        ("from torchvision.ops import roi_align", "roi_align(b, s, 7)"),
    ):
        src = f"import torch\n{imp}\n\n\ndef f(b, s, i):\n    return {call}\n"
        assert "TPU211" in codes(run(src)), imp


# --- a helper named for CUDA's out-of-memory error (Mask2Former's copy of detectron2's `retry_if_cuda_oom`): its
# `torch.cuda.empty_cache()` runs only after a CUDA OOM; removed, a CUDA run retried without clearing the cache ---


def test_a_cuda_oom_retry_helper_is_left_as_written():
    src = (
        "import torch\n\n\ndef retry_if_cuda_oom(func):\n    def wrapped(*args):\n        try:\n"
        "            return func(*args)\n        except torch.cuda.OutOfMemoryError:\n            pass\n"
        "        torch.cuda.empty_cache()\n        return func(*args)\n\n    return wrapped\n"
    )
    res = run(src)
    assert "torch.cuda.empty_cache()" in res.new_source and "torch.accelerator" not in res.new_source
    assert any("out-of-memory" in d.message for d in res.diagnostics)
