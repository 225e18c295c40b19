"""Wrong rewrites found by reading held-out check 18 (benchmarks/migrate_corpus_heldout18.txt) on the tool that
already had held-out 17's classes, each as a class in its own words."""

from __future__ import annotations

from test_heldout9_classes import _migrate_tree


def _write(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


# --- whisperX: the CLI's `--device` default ("cuda" if available else "cpu") reaches, through a function-level
# import and a second module, a module built on a library that takes "cpu" or "cuda" only (CTranslate2). Renamed,
# a TPU host's default run handed CTranslate2 'tpu' and failed where the original ran on the CPU ---
_ENGINE = (
    "import ctranslate2\nimport torch\n\n\ndef load(device):\n"
    "    return ctranslate2.Translator('m', device=device)\n"
)
_PIPELINE = "from pkg.engine import load\n\n\ndef run(args):\n    return load(args.device)\n"
_CLI = (
    "import argparse\nimport torch\n\n\ndef cli():\n    p = argparse.ArgumentParser()\n"
    "    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')\n"
    "    from pkg.pipeline import run\n\n    run(p.parse_args())\n"
)


def test_a_device_choice_reaching_a_cpu_or_cuda_only_library_through_imports_is_kept(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/engine.py": _ENGINE,
            "pkg/pipeline.py": _PIPELINE,
            "pkg/__main__.py": _CLI,
        },
    )
    cli = _migrate_tree(tmp_path)["pkg/__main__.py"]
    assert "default='cuda' if torch.cuda.is_available() else 'cpu'" in cli
    assert "'tpu'" not in cli and "torch.accelerator" not in cli
    assert "reaches the project's `engine.py`, built on `ctranslate2`" in cli
    assert cli.count("TODO(tpu-migrate") == 1


def test_a_program_that_never_imports_the_limited_module_is_still_migrated(tmp_path):
    # the same CLI beside the engine, but importing only a plain helper: its device is free to be 'tpu'
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/engine.py": _ENGINE,
            "pkg/pipeline.py": "def run(args):\n    return args.device\n",
            "pkg/__main__.py": _CLI,
        },
    )
    cli = _migrate_tree(tmp_path)["pkg/__main__.py"]
    assert "default='tpu' if torch.accelerator.is_available() else 'cpu'" in cli
    assert "TODO(tpu-migrate" not in cli


def test_a_kernel_stack_reached_the_same_way_does_not_keep_the_device(tmp_path):
    # a triton kernel module takes tensors, not a device name: the importers stay migrated (see built_on)
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/engine.py": "import triton\nimport torch\n\n\ndef load(device):\n    return torch.ones(1, device=device)\n",
            "pkg/pipeline.py": _PIPELINE,
            "pkg/__main__.py": _CLI,
        },
    )
    cli = _migrate_tree(tmp_path)["pkg/__main__.py"]
    assert "default='tpu' if torch.accelerator.is_available() else 'cpu'" in cli
