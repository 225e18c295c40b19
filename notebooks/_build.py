"""Regenerate the five notebooks from this file (the committed .ipynb files are what users open).

    python notebooks/_build.py

Notebooks are written without outputs or execution counts; the first code cell is tagged
``parameters`` (papermill convention) and holds small defaults so CI runs them fast.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent


def md(text: str):
    return new_markdown_cell(text.strip("\n"))


def code(text: str, *tags: str):
    cell = new_code_cell(text.strip("\n"))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def params(text: str):
    return code(text, "parameters")


NOTEBOOKS: dict[str, list] = {}

# ------------------------------------------------------------------------------------------------ 01
NOTEBOOKS["01_migrate"] = [
    md("""
# 01 · Migrate CUDA and torch_xla code to "tpu"
**The answer first:** per sample, what `tpu-migrate` converted and whether it trains the same on "tpu" as on "cpu".
"""),
    params("""
STEPS = 5          # training steps per run (raise on real hardware)
SAMPLES = ["cuda_ddp", "xla_legacy", "xla_modern"]  # run on both devices (+ "notebook": ~30 s more); None = all
EXAMPLES = None    # folder with projects to migrate; None = the bundled examples/ (a copy is migrated)
SHOW_DIFFS = True  # print the unified diff of every migrated file
"""),
    code("""
import tempfile

from tpu_workbench.bench import demo_chain as chain
from tpu_workbench.bench import notebook_views as nbv

work = tempfile.mkdtemp(prefix="tpu-migrate-demo-")
progress = nbv.Progress("migrating a copy of the sample projects ...")
mig = chain.migrate_examples(work, source=EXAMPLES)
assert mig.run is not None, f"tpu-migrate failed: {mig.error}"
names = [s.name for s in chain.SAMPLES if s.runnable and (SAMPLES is None or s.name in SAMPLES)]
checks = []
for i, name in enumerate(names, 1):  # ~20-60 s per sample: the line says which one runs
    progress.say(f"[{i}/{len(names)}] {name}: {STEPS} steps on cpu and on tpu ...")
    checks.append(chain.check_losses(work, name, steps=STEPS))
progress.answer(chain.verdict_frame(mig.run, checks, work))
"""),
    md("""
## How: migrate a copy, then train on both devices
`tpu-migrate` rewrote the bundled sample projects (a CUDA DDP script, a legacy and a modern torch_xla script, an
SPMD script, and a notebook) in a temporary copy; each runnable migrated script then ran as a child process, once
with `--device cpu` and once on its migrated default device `"tpu"` (same seeds). The SPMD sample is flagged, not
rewritten, so it is not run. The parameters are small so CI runs this in about a minute.
"""),
    code("""
from tpu_workbench.bench import plots
from tpu_workbench.migrate import markdown_report

print(f"migrated copy in {work} ({mig.seconds:.1f} s); converted {mig.run.converted_percent:.1f}% of the findings")
platform = chain.tpu_platform()
print(f'"tpu" device here: {platform}')
nbv.show_table(chain.checks_frame(checks))
tpu_label = f"tpu via {platform.split('via ', 1)[1].split(' (')[0]}" if "via" in platform else "tpu"
nbv.show(plots.plot_losses(checks, tpu_label=tpu_label))
"""),
    md("""
**What to see:** the dashed "tpu" curve lies on the solid "cpu" curve for every sample — the migrated code runs
on the `"tpu"` device and computes the same losses (fp32 within rtol 1e-3; the notebook sample, if you add it,
within 2e-2, as its autocast uses bf16 on the accelerator only). Here the "tpu" device is this project's backend running through
JAX on the CPU (the legend says so), not a TPU.
"""),
    code("""
failed = [c.summary() for c in checks if not c.ok]
assert not failed, f"loss curves disagree or a run failed: {failed}"
"""),
    md("""
## The diffs
Each hunk is a rewrite; lines tpu-migrate cannot rewrite safely get one `# TODO(tpu-migrate TPUnnn)` comment.
"""),
    code("""
for f in mig.run.files:
    if SHOW_DIFFS and f.diff:
        print(f.diff)
"""),
    md("""
## Diagnostics
One row per finding: `rewritten`, `warned` (rewritten, check the semantics) or `flagged` (left for a human).
"""),
    code("""
nbv.show_table(chain.diagnostics_frame(mig.run, work))
"""),
    md("""
## tpu-migrate's report (the same markdown `tpu-migrate --report FILE.md` writes)
"""),
    code("""
nbv.show_md(markdown_report(mig.run))
"""),
]

# ------------------------------------------------------------------------------------------------ 02
NOTEBOOKS["02_throughput"] = [
    md("""
# 02 · Throughput here and in your result files
**The answer first:** tokens/s per device variant measured here, ratio to `BASELINE`, `noisy` if IQR > 20%.
"""),
    params("""
WORKLOADS = ["tiny"]     # decoder presets (tiny, tiny-moe, small, ...) or small-cnn
PHASES = ["train"]       # train, prefill, decode
BATCH = 4
SEQ = 64
BUDGET_S = 0.5           # seconds of timing per combination (raise for steadier numbers)
COMPILED = [False]       # add True for torch.compile (backend "tpu" on tpu; inductor on cpu takes ~45 s here)
EAGER_MODES = ["strict", "fused"]  # "tpu" eager modes, side by side: one op at a time, or fused into XLA programs
DEVICES = None           # None = every device present
RESULT_FILES = []       # your result files (paths or globs); the committed examples: ["results/*.jsonl"]
BASELINE = "cpu"         # ratios are taken against this variant
"""),
    code("""
import warnings

from tpu_workbench.bench import analysis, compare, devices, run
from tpu_workbench.bench import notebook_views as nbv

progress = nbv.Progress("measuring ...")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    fresh = run.run_matrix(WORKLOADS, PHASES, DEVICES or devices.present_devices(), batches=[BATCH], seqs=[SEQ],
                           compiled=COMPILED, budget_s=BUDGET_S, progress=False, eager_modes=EAGER_MODES,
                           on_combo=lambda i, n, name: progress.say(f"[{i}/{n}] measuring {name} ..."))
here = compare.compare_table(analysis.load_frames(fresh.records), baseline=BASELINE)
progress.answer(here[["workload", "phase", "variant", "platform", "tokens_per_s", f"ratio_vs_{BASELINE}", "noisy"]])
"""),
    md("""
## How: every run, this one's and your files', one row per record
Runs the workloads on every device present here (cpu; cuda if there is a GPU; tpu when the "tpu" device is
registered), then loads result files you point at — e.g. a run from a GPU box and one from a TPU VM made with
`tpu-bench run ... -o gpu.jsonl`. Every row says which platform and which file produced it; a "tpu" run through
XLA on a CPU or GPU is labelled as such, never as a TPU.
"""),
    code("""
from tpu_workbench.bench import plots

print("devices present here:", ", ".join(devices.present_devices()), "| ran on:", ", ".join(DEVICES or ["every device present"]))
for combo, msg in fresh.failures:
    print("FAILED", combo, msg)
df = analysis.load_frames(fresh.records, RESULT_FILES)
print(analysis.emulation_note(df))
nbv.show_table(analysis.measured_table(df))
"""),
    md("""
## Ratios (this run), and GPU vs TPU where both exist
"""),
    code("""
this_run = df[df["file"] == "this run"] if not df.empty else df
if len(this_run):
    nbv.show_table(compare.compare_table(this_run, baseline=BASELINE).drop(columns=["peak_basis"]))
else:
    print("nothing measured in this run (see the failures above)")
table, note = analysis.accelerator_comparison(df)
print(note)
if table is not None:
    nbv.show_table(table.drop(columns=["peak_basis"]))
"""),
    code("""
nbv.show(plots.plot_throughput_bars(df))
"""),
    md("""
**What to see:** tokens/s per device variant for each workload cell; runs from different files (your
result files, the committed examples in `results/`) are separate bars named by their file, never one median; on this CPU-only machine the
"tpu (via XLA:CPU)" bar is this project's backend emulated on the same processor, so it measures dispatch
overhead, not a TPU — point `RESULT_FILES` at runs from real hardware to compare accelerators.

Pick which sources to draw (headless, the plot above uses all of them):
"""),
    code("""
nbv.throughput_explorer(df)
"""),
]

# ------------------------------------------------------------------------------------------------ 03
NOTEBOOKS["03_mfu"] = [
    md("""
# 03 · MFU per phase and device: the two FLOP conventions; decode bandwidth
"""),
    params("""
PROJECT_CHIP, PROJECT_WORKLOAD, PROJECT_SEQ = "TPU v7", "llama3-70b", 8192  # the answer below
WORKLOADS, PHASES = ["tiny"], ["train", "prefill", "decode"]  # measured here (decoder presets)
BATCH, SEQ, BUDGET_S = 4, 64, 0.3
RUN_HERE = True          # False: only your result files, the examples and the projections
RESULT_FILES = []        # your measured runs, e.g. ["gpu.jsonl"]
EXAMPLE_FILES = ["results/tiny-phases.jsonl"]  # committed example runs (not yours), shown apart
"""),
    code("""
from tpu_workbench.bench import notebook_views as nbv
from tpu_workbench.bench import serving_answers as answers

sentence, short = answers.mfu_answer(PROJECT_CHIP, PROJECT_WORKLOAD, seq=PROJECT_SEQ)
print(sentence)
nbv.show_table(short)
"""),
    md("""
MFU = FLOPs per token × tokens/s ÷ peak. Two conventions for attention FLOPs are in use: **palm** (full
attention: PaLM, nanoGPT, torchtitan) and **causal** (halved: MaxText, Megatron). Below: both side by side for
runs measured here, for your result files, for the committed example runs (kept in their own table: they are not
yours) and for projected catalog chips; decode's memory-bandwidth utilisation (MBU) beside its MFU. Every row
says its source.
"""),
    code("""
import warnings

from tpu_workbench.bench import analysis, plots
from tpu_workbench.bench.devices import present_devices
from tpu_workbench.bench.run import run_matrix

records = []
if RUN_HERE:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_matrix(WORKLOADS, PHASES, present_devices(), batches=[BATCH], seqs=[SEQ], budget_s=BUDGET_S,
                         progress=False)
    records = res.records
    for combo, msg in res.failures:
        print("FAILED", combo, msg)
projected = analysis.project_phases(PROJECT_CHIP, [PROJECT_WORKLOAD], seq=PROJECT_SEQ)
df = analysis.load_frames([*records, *projected], [*RESULT_FILES, *EXAMPLE_FILES])
table = analysis.mfu_conventions(df)
print(analysis.emulation_note(df))
groups = answers.source_tables(table, EXAMPLE_FILES)
for name, part in groups.items():
    print(f"{name}:" + ("  (committed example results, not your runs)" if name == answers.EXAMPLES else ""))
    nbv.show_table(part)
"""),
    code("""
mine = table[~table.index.isin(groups.get(answers.EXAMPLES, table.iloc[:0]).index)]
nbv.show(plots.plot_mfu_conventions(mine))
"""),
    md("""
**What to see:** the causal bar is always the lower one, by the `causal/palm` ratio in the table: a few percent
at 64 tokens, where attention is a small share of the FLOPs, more at 8k tokens — so an MFU figure means little
without its convention. Decode counts are the same in both (one query sees every cached key). Measured MFU here
is against a *measured host-CPU matmul peak* (the peak basis column), projected MFU against the catalog peak.
The figure leaves out the committed examples (your runs and the projection only).
"""),
    md("""
## Decode: bandwidth, not FLOPs
"""),
    code("""
nbv.show(plots.plot_decode_bandwidth(mine))
"""),
    md("""
**What to see:** decode reads every weight and the KV cache for one token per sequence, so its MBU is far higher
than its MFU — decode is memory-bandwidth bound; batch more sequences to raise MFU.

## Decode against context: the cache read grows with every cached token
"""),
    code("""
from tpu_workbench.bench.projection import serving_views as sv

ctx = sv.decode_context_frame("TPU v6e", "llama3-8b", n_chips=8, layout="tp", seqs=64)
print("projected: Llama-3-8B decode, 64 sequences on 8 x TPU v6e (tp=8)")
nbv.show_table(ctx)
"""),
    md("""
**What to see:** each step reads the weights once and every sequence's whole KV cache, so the step time and the
bytes read grow with the context while MFU falls and MBU rises; at 32k the 64 caches no longer fit in HBM, and the
row says so instead of giving a time or a price.
"""),
]

# ------------------------------------------------------------------------------------------------ 04
NOTEBOOKS["04_tco"] = [
    md("""
# 04 · $ per million output tokens at an interactivity target, per chip
"""),
    params("""
CHIPS = ["TPU v7", "TPU v6e", "H100 SXM", "H200", "B200"]
WORKLOAD, MIX = "llama3-70b", (1024, 1024)  # input, output tokens per request (e.g. (8192, 1024))
N_CHIPS, LAYOUT = 8, "tp"                  # chips serving one model replica, parallel layout
PRECISION, KV_PRECISION = "bf16", None     # weights/matmuls (fp8 where the chip has an fp8 peak); KV cache
PRICE_KIND = "owner-tco"                   # kind of price: owner-tco, committed, list
TARGET = 20.0                              # interactivity target, output tokens/s per user
"""),
    code("""
from tpu_workbench.bench import notebook_views as nbv
from tpu_workbench.bench import serving_answers as answers
from tpu_workbench.bench.projection import serving_views as sv

costs = sv.cost_table(CHIPS, WORKLOAD, mix=MIX, target=TARGET, n_chips=N_CHIPS, layout=LAYOUT,
                      precision=PRECISION, kv_precision=KV_PRECISION, price_kind=PRICE_KIND)
sentence, short = answers.cost_answer(costs, target=TARGET)
print(sentence)
nbv.show_table(short)
"""),
    md("""
Projected by the serving model (`tpu_workbench.bench.projection.serving`) for one replica of `N_CHIPS` chips
under continuous batching with chunked prefill: every decode step reads the weights **and each sequence's whole
KV cache**, plus the engine's time per running sequence calibrated per vendor on InferenceX row 12; the KV
capacity left in HBM bounds the concurrency (paged blocks), and the price is taken at the largest concurrency that
still meets the target. A chip whose setting does not fit, or misses the target, gets a
reason and no price. Chips are compared only at the same kind of price (a cloud list price, a committed rental,
an owner's total cost of ownership). The full table:
"""),
    code("""
curves = sv.curve_frame(CHIPS, WORKLOAD, mix=MIX, n_chips=N_CHIPS, layout=LAYOUT, precision=PRECISION,
                        kv_precision=KV_PRECISION)
published_vs = sv.published_vs_projected()
print(f"projected (serving model): {WORKLOAD}, {MIX[0]} in / {MIX[1]} out, {N_CHIPS} chips {LAYOUT}, "
      f"at >= {TARGET:g} output tok/s/user")
nbv.show_table(costs)
nbv.show(sv.plot_serving(curves, costs, target=TARGET, published=published_vs))
nbv.show_table(published_vs)
"""),
    md("""
**What to see:** the left panel is each chip's throughput-interactivity curve (output tokens only); the middle
panel prices each chip at the target in $ per million **output** tokens (input tokens are priced apart in the
table, by the prefill share of each step). The right panel is in the published unit, $ per million **total**
tokens, for the InferenceX Qwen3.5-397B FP8 8k/1k points: row 12 (tok/s/chip at 20 tok/s/user) calibrates one
engine-overhead parameter per vendor, so the 100 tok/s/user prices shown are validation, with their errors.

## The decode batch sweep of the roofline projection (per-chip decode steps, no prefill)
"""),
    code("""
SEQ = 4096               # context length during decode
PRICE = 0.0              # $/chip-hour for every chip; 0 = each chip's catalog price of PRICE_KIND
RESULT_FILES = []        # measured decode runs on a GPU / real TPU, e.g. ["gpu.jsonl"]
"""),
    code("""
from tpu_workbench.bench import analysis, plots

records = analysis.decode_frontier(CHIPS, WORKLOAD, n_chips=N_CHIPS, layout=LAYOUT, seq=SEQ)
frame = analysis.frontier_frame(records, PRICE_KIND, PRICE or None)
best = analysis.at_target(frame, TARGET)
published = analysis.published_serving()
measured = analysis.measured_serving(analysis.load_frames(files=RESULT_FILES)) if RESULT_FILES else None
price = f"${PRICE:g}/chip-hr for every chip" if PRICE else f"each chip's {PRICE_KIND} price in the catalog"
print(f"projected: {WORKLOAD} decode on {N_CHIPS} chips ({LAYOUT}), context {SEQ}; price: {price}")
nbv.show_table(best)
"""),
    code("""
nbv.show(plots.plot_tco(frame, target=TARGET, workload=WORKLOAD, published=published, measured=measured))
"""),
    md("""
**What to see:** each chip's Pareto front bends down as the per-user target rises; at the target line the cheapest
chip is the one with the lowest dashed curve on the right. The published stars are for a different, larger model
(Qwen3.5-397B FP8, 8k/1k serving), shown as reference points, not as a check of this projection.
"""),
    md("""
## Every price tier at the target
"""),
    code("""
at = analysis.records_at_target(records, best)
if at:
    nbv.show(plots.plot_cost_per_tier(at, title_suffix=f" (projected: {WORKLOAD} at >= {TARGET:g} tok/s/user)"))
nbv.show_table(published.drop(columns=["setting"]))
"""),
    md("""
## Play: chips, kind of price, your own $/chip-hour, the interactivity target
"""),
    code("""
nbv.tco_explorer(records, chips=CHIPS, workload=WORKLOAD, target=TARGET, price_kind=PRICE_KIND, price=PRICE,
                   published=published)
"""),
]

# ------------------------------------------------------------------------------------------------ 05
NOTEBOOKS["05_scaling"] = [
    md("""
# 05 · Scaling from 1 chip to 8,192+ (training) and across the chips of one serving replica
"""),
    params("""
CHIPS = ["TPU v7", "B200", "H100 SXM"]
DENSE, DENSE_LAYOUTS = "llama3-70b", ["dp", "fsdp"]
MOE, MOE_LAYOUTS = "qwen3-235b-a22b", ["fsdp+ep", "ep"]
CHIP_COUNTS = [1, 8, 64, 512, 1024, 2048, 4096, 8192, 16384]
REPLICA_CHIPS, TARGET = [1, 2, 4, 8, 16], 20.0  # serving: chips per replica, output tok/s per user
"""),
    code("""
from tpu_workbench.bench import notebook_views as nbv
from tpu_workbench.bench import serving_answers as answers

sentence, short = answers.scaling_answer(CHIPS, [(DENSE, DENSE_LAYOUTS), (MOE, MOE_LAYOUTS)], CHIP_COUNTS)
print(sentence)
nbv.show_table(short)
"""),
    md("""
Projected training throughput per chip as the chip count grows (weak scaling: a fixed batch per chip), for a
dense model under data parallelism (`dp`) and FSDP (`fsdp`) and a MoE model with expert parallelism (`fsdp+ep`,
`ep`). Efficiency = per-chip tokens/s ÷ that at the smallest count that fits (above 100 %: more sharding frees
memory, so less recomputation). The controls (chips, GEMM efficiency, overlap, scale-out bandwidth) change the
efficiency table and the curves; the stars are the published TorchTitan Qwen3-MoE-235B points on TPU v7:
"""),
    code("""
nbv.scaling_explorer(CHIPS, [(DENSE, DENSE_LAYOUTS), (MOE, MOE_LAYOUTS)], CHIP_COUNTS)
"""),
    md("""
**What to see:** dense training stays near 1.0 to thousands of chips because gradient and FSDP traffic is
overlapped with a large step; expert parallelism drops once its all-to-all leaves the scale-up domain (8 GPUs;
one TPU slice), which is why the TPU's large ICI domain keeps MoE scaling flat. How far to trust these curves:
the projection against published results, one row per group (every row with its inputs and source:
`tpu-bench project --vs-published`, and notebook 06_validation):
"""),
    code("""
from tpu_workbench.bench.projection import projection_vs_published

vs = projection_vs_published()
vs = vs[vs["rel_error"].notna()].assign(abs_error_pct=lambda d: 100 * d["rel_error"].abs())
by_group = vs.groupby(["group", "category"], sort=False)["abs_error_pct"]
nbv.show_table(by_group.agg(
    rows="size",
    within_15_pct=lambda e: int((e <= 15).sum()),
    median_abs_error_pct="median",
    max_abs_error_pct="max",
).round(1).reset_index())
"""),
    md("""
## Serving: one replica on more chips (the serving model, 1k in / 1k out, tensor parallel)
More chips per replica leave more HBM for KV cache (more concurrent sequences) but add all-reduces per layer; the
cheapest split is where $/M output tokens at the target is lowest. A count that does not fit says why.
"""),
    code("""
for chip in CHIPS:
    print(f"{chip}: {DENSE}, >= {TARGET:g} output tok/s/user (projected)")
    nbv.show_table(answers.replica_answer(chip, DENSE, REPLICA_CHIPS, target=TARGET))
"""),
]

# ------------------------------------------------------------------------------------------------ 06
NOTEBOOKS["06_validation"] = [
    md("""
# 06 · Model-zoo validation: which transformers architectures run on "tpu"
**The answer first:** of the installed `transformers` architectures, how many build, run on "tpu" (tier 1) and
agree with the CPU (tier 2). How, the failure classes and every architecture follow.
"""),
    params("""
RECORDS = None     # records.jsonl (or its folder) written by `tpu-bench validate --out DIR`; None = the committed run
LIVE_ARCHS = []    # e.g. ["llama", "vit", "bert"]: validate these now instead (about a minute each on 2 CPU cores)
TOP = 15           # failure classes in the chart
"""),
    code("""
import tempfile
from pathlib import Path

from tpu_workbench.bench.validate import views
from tpu_workbench.bench.validate.orchestrate import run_validation
from tpu_workbench.bench.validate.sweep import SweepOptions

if LIVE_ARCHS:  # progress: one line per architecture
    RECORDS = Path(tempfile.mkdtemp(prefix="tpu-validate-"))
    run_validation(LIVE_ARCHS, options=SweepOptions(jobs=1, timeout=600, out=RECORDS), compile="none")
records = views.load(RECORDS)
views.figures(records)
"""),
    md("""
## How
`tpu-bench validate` builds every architecture of the installed `transformers` as a tiny random-weight model,
runs forward and backward on the CPU and on the device, and records whether it runs (tier 1: no op sent back to
the CPU) and agrees with the CPU (tier 2: outputs and gradients, float32). By default this notebook reads the
committed run in `results/validation/`; set `LIVE_ARCHS` to validate a few architectures now.

## Failure classes
Each bar is one cause (a missing operator is named); its length is the number of built architectures it blocks.
"""),
    code("""
views.failure_chart(records, top=TOP);
"""),
    md("""
## Every architecture
`built` is False for harness failures (the tiny config or its inputs do not run on the CPU either): they are
never counted as passes.
"""),
    code("""
views.table(records)
"""),
]


NOTEBOOKS["06_assess"] = [
    md("""
# 06 · Assess a repository: will it run on "tpu", what must change, what would it cost
**The answer first:** `tpu-bench assess`'s verdict on a small CUDA-style repository (`examples/assess_demo`):
do its commands still pass on "tpu" after the migration, and what would training cost. Report and details follow.
"""),
    params("""
TIMEOUT = 240          # seconds per command and phase
GPU, TPU = "H100 SXM", "TPU v7"
CHIPS, TOKENS = 8, 1e9
"""),
    code("""
import shutil
import tempfile
from pathlib import Path

from tpu_workbench.bench import notebook_views as nbv
from tpu_workbench.bench.assess import AssessOptions, assess
from tpu_workbench.bench.paths import examples_dir

work = Path(tempfile.mkdtemp(prefix="assess-demo-"))
repo = shutil.copytree(examples_dir() / "assess_demo", work / "repo")
data = assess(AssessOptions(
    path=repo, out=work / "assessment", timeout=TIMEOUT, gpu=GPU, tpu=TPU, chips=CHIPS, tokens=TOKENS,
    run=["python train.py", "python old_cuda_only.py"], tests=["python -m pytest -q -p no:cacheprovider tests"],
    default_device=True, workers=2,
), progress=True)
nbv.show_md(f"**Verdict (exit {data['verdict']['exit_status']}):** {data['verdict']['headline']}")
"""),
    md("""
## How: the repository and the commands
`tpu-bench assess PATH` answers three questions together for one repository: it migrates a temporary copy with
`tpu-migrate` (rewrites and flags by rule, effort per file), runs the commands you name on "cpu" before the
migration and on "tpu" after (one subprocess each, with a timeout), and projects the cost of training the model it
observed to a GPU and a TPU. **It runs the repository's code**, in copies; your tree is only read.

Here: a CUDA-style training script whose input length changes every step (a recompile on a TPU), a script that
fails before any migration, and a test (`default_device` makes "tpu" torch's default device in the tpu run, so the
test that never names a device exercises it).
"""),
    code("""
for path in sorted(repo.rglob("*.py")):
    print(f"--- {path.relative_to(repo)}\\n{path.read_text()}")
"""),
    md("""
## The report
The same text as `assessment.md` (with `assessment.html` and `assessment.json` beside it): verdict first, then
the commands, the cost, the migration.
"""),
    code("""
nbv.show_md((work / "assessment" / "assessment.md").read_text())
"""),
    md("""
## What the runs observed
Per command: the outcome, and on "tpu" how many input shapes each model saw (each new shape compiles anew).
"""),
    code("""
for c in data["commands"]:
    shapes = [s["distinct_shapes"] for s in c["tpu_recompiles"]["shapes"]]
    print(f"{c['outcome']:<40} on_tpu={c['on_tpu']!s:<5} shapes_on_tpu={shapes}  {c['command']}")
assert data["user_tree_unchanged"]
"""),
]


def build() -> list[Path]:
    written = []
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(
            cells=cells,
            metadata={
                "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                "language_info": {"name": "python"},
            },
        )
        for i, cell in enumerate(nb.cells):  # stable ids keep diffs small on regeneration
            cell["id"] = f"{name[:2]}-{i:02d}"
        nbformat.validate(nb)
        path = HERE / f"{name}.ipynb"
        nbformat.write(nb, path)
        written.append(path)
    return written


if __name__ == "__main__":
    for p in build():
        print(p)
