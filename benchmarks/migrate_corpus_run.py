"""Real scripts of the fresh corpus, migrated by tpu-migrate and run on "tpu" with zero hand edits, against the CPU.

For each script in ``SCRIPTS``: its repository folder is extracted at the manifest's commit from a bare git mirror
(``--mirror``, what the ``fetch`` tool writes) twice, into ``<scratch>/cpu`` and ``<scratch>/tpu``. The ``tpu`` copy is
migrated with ``python -m tpu_workbench.migrate.cli --write`` and then run exactly as its README says (one
subprocess, a timeout, ``nice``). The ``cpu`` copy is the unmigrated original; where the original hard-codes CUDA
(``device='cuda'``) the reference copy alone gets ``cpu_patch`` so that it runs on the CPU -- the migrated copy is
never edited. The numbers each run prints (losses, accuracies; ``numbers``) are compared with a tolerance, and the
migrated run must show that it ran on the "tpu": a ``sitecustomize`` on ``PYTHONPATH`` (the script is untouched)
installs a global module forward pre-hook in every process of the run and prints the device types of the tensors
that modules were called with, which must include "tpu".

A Jupyter notebook (``argv`` is one ``.ipynb``) is run as Jupyter runs it, unedited: ``NB_DRIVER`` executes its
cells in order in a fresh ``python3`` kernel (nbclient + ipykernel) whose working directory is the notebook's folder,
and prints each cell's printed output as the cell ends. The kernel is the process that calls the modules, and
nbclient does not pass its own stdout on, so the hook also appends each device type it sees to the file that
``TPU_RUN_DEVICES_FILE`` names, which the runner reads (for every run).

    python benchmarks/migrate_corpus_run.py --mirror /work/.mirror --scratch /tmp/corpus-run [--only DDP ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "migrate_corpus_fresh.txt"

#: A sitecustomize put on PYTHONPATH for the runs: every Python process of the run (spawned workers too) starts from
#: the same seeds on both sides (Python's, torch's and NumPy's global generators; a script that seeds itself overrides
#: them; one that does not, or whose spawned workers do not, becomes comparable), notes the device types of the tensors
#: that modules are called with and prints them at exit -- and appends each device type to the file named by
#: TPU_RUN_DEVICES_FILE the first time it sees it (a notebook's kernel: its stdout is not the run's, see NB_DRIVER);
#: the script itself is untouched.
HOOK = (
    "import atexit, os, random, torch\n"
    "random.seed(0)\n"
    "torch.manual_seed(0)\n"
    "try:\n"
    "    import numpy\n"
    "    numpy.random.seed(0)\n"
    "except ImportError:\n"
    "    pass\n"
    "_devs = set()\n"
    "_devs_file = os.environ.get('TPU_RUN_DEVICES_FILE')\n"
    "def _seen(module, args):\n"
    "    new = {a.device.type for a in args if isinstance(a, torch.Tensor)} - _devs\n"
    "    if new:\n"
    "        _devs.update(new)\n"
    "        if _devs_file:\n"
    "            with open(_devs_file, 'a') as f:\n"
    "                f.write(','.join(sorted(new)) + '\\n')\n"
    "torch.nn.modules.module.register_module_forward_pre_hook(_seen)\n"
    "atexit.register(lambda: print('@@devices', ','.join(sorted(_devs)), flush=True))\n"
)

#: How a notebook is run (written to the scratch folder, run with the runner's Python as ``python nbrun.py NOTEBOOK
#: TIMEOUT`` in the notebook's folder): nbclient executes every cell, in order, in a new "python3" kernel started in
#: that folder, as Jupyter's "Restart & Run All" does; the notebook file is not changed (the executed copy stays in
#: memory). Each cell's stdout/stderr streams are printed as the cell ends, so the runner parses them like a script's
#: output; a cell that raises ends the run with exit 1 and its traceback. TIMEOUT bounds each cell.
NB_DRIVER = """
import re
import sys
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

def printed(cell, cell_index, execute_reply):
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            sys.stdout.write(out["text"])
    sys.stdout.flush()

nb = nbformat.read(sys.argv[1], as_version=4)
client = NotebookClient(
    nb, timeout=int(sys.argv[2]), kernel_name="python3", resources={"metadata": {"path": "."}},
    on_cell_executed=printed,
)
try:
    client.execute()
except CellExecutionError as e:
    print(re.sub(r"\\x1b\\[[0-9;]*m", "", str(e)), flush=True)  # (IPython's traceback, without its colours)
    sys.exit(1)
"""

#: The notebooks of rasbt/deeplearning-models begin with ``%load_ext watermark`` and ``%watermark ...`` (they print
#: the versions used); the watermark package is not installed here (and nothing can be installed), so the hook's
#: folder holds a stand-in IPython extension of that name whose %watermark prints nothing -- the environment the
#: notebook expects, not an edit of it.
WATERMARK = """
def load_ipython_extension(ip):
    ip.register_magic_function(lambda line="": None, "line", "watermark")
"""


@dataclass(frozen=True)
class Script:
    """One script of the corpus: where it lives, how its README runs it, and which printed numbers to compare."""

    name: str
    repo: str
    folder: str  # repository folder extracted and migrated (the script's own folder)
    # the command line, relative to ``folder``; or one .ipynb alone: the notebook, run as Jupyter does (NB_DRIVER)
    argv: tuple[str, ...]
    numbers: str  # regex whose groups are the numbers compared (losses, accuracies)
    timeout: int = 900
    cpu_patch: tuple[tuple[str, str], ...] = ()  # (file, 'old=>new') applied to the CPU reference copy only
    rtol: float = 1e-3
    atol: float = 1e-4
    manifest: str = MANIFEST.name  # the corpus manifest that pins the repository's commit
    setup: str = ""  # Python run in both copies' folder first (synthetic data: nothing is downloaded)
    needs: tuple[
        str, ...
    ] = ()  # the script's own requirements beyond torch (it is skipped, not passed, without)
    # regex: once the run prints it, the run is ended there and counts as exit 0 (for a script whose compared
    # numbers are all printed before an ending that cannot finish on either side, e.g. plotting with an API that
    # today's matplotlib no longer has)
    stop_at: str = ""
    # Python run on both sides before the script (appended to the hook's sitecustomize): a name that today's
    # libraries removed and the script's era had (NumPy 2.0's np.Inf), put back -- the environment the script was
    # written for, not an edit of it
    compat: str = ""
    # environment variables of the run, both sides: what the README has its user set up (WANDB_MODE=offline for a
    # script that logs to Weights & Biases; the repository's root on PYTHONPATH for notebooks that import its package,
    # as `pip install -e .` would); "{root}" in a value is the extracted copy's root (each side its own), and a
    # PYTHONPATH given here comes after the hook's
    env: tuple[tuple[str, str], ...] = ()
    # what the user types at an interactive script's prompts (its input() loop), fed on its standard input, both
    # sides; past its end input() raises EOFError, so such a script also has a ``stop_at`` (its last answer)
    stdin: str = ""


#: Time-Series-Library's ETTh1.csv (17,420 hourly rows; the loader's borders need 14,400), synthetic: daily and
#: weekly cycles with a drift and seeded noise, in the columns and date format of the real file.
ETT_CSV = """
import numpy as np, pandas as pd, os
rng = np.random.default_rng(0)
n = 17420
t = np.arange(n)
cols = {}
for i, c in enumerate(["HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT"]):
    cols[c] = (np.sin(2 * np.pi * t / 24 + i) * (1 + 0.1 * i) + 0.3 * np.sin(2 * np.pi * t / 168)
               + 0.05 * t / n * (i + 1) + 0.2 * rng.standard_normal(n)).round(3)
dates = pd.date_range("2016-07-01", periods=n, freq="h").strftime("%Y-%m-%d %H:%M:%S")
os.makedirs("dataset/ETT-small", exist_ok=True)
pd.DataFrame({"date": dates, **cols}).to_csv("dataset/ETT-small/ETTh1.csv", index=False)
"""
#: The ETTh1 command line shared by the repository's scripts/<task>/ETT_script/*.sh (their first run).
_ETT = (
    "--is_training 1 --root_path ./dataset/ETT-small/ --data_path ETTh1.csv --data ETTh1 --features M "
    "--seq_len 96 --e_layers 2 --d_layers 1 --factor 3 --enc_in 7 --dec_in 7 --c_out 7 --des Exp --itr 1"
)


def _tsl(script: str, args: str) -> Script:
    """One of Time-Series-Library's ETTh1 scripts, run as its .sh's first command: on the CPU reference the
    --use_gpu default (on, without a check that CUDA is there) is off; the migrated copy keeps its default."""
    return Script(
        f"Time-Series-Library {script} (first run of the .sh: train to early stop, then test; synthetic ETTh1)",
        "thuml/Time-Series-Library",
        ".",
        ("-u", "run.py", *f"{args} {_ETT}".split()),
        r"Train Loss: ([\d.]+) Vali Loss: ([\d.]+) Test Loss: ([\d.]+)|mse:([\d.]+), mae:([\d.]+)",
        timeout=2400,
        cpu_patch=(
            (
                "run.py",
                "action='store_true', default=True, help='use gpu=>action='store_true', default=False, help='use gpu",
            ),
        ),
        rtol=1e-3,
        atol=1e-5,
        manifest="migrate_corpus_heldout12.txt",
        setup=ETT_CSV,
        needs=("sktime", "datasets"),
    )


def _mnist_idx(raw: str, n_train: int, n_test: int, flip: float = 0.0) -> str:
    """A ``setup`` writing a small synthetic MNIST (or Fashion-MNIST) in torchvision's raw idx files under ``raw``:
    28x28 uint8 images, one seeded random binary pattern per class
    plus noise, so the dataset classes find their files
    and download nothing. ``flip``: that share of the labels is redrawn at random after the images are (without
    it every model reaches 100% within an epoch, and the accuracies it prints compare nothing)."""
    relabel = (
        f"    labels = np.where(rng.random(n) < {flip!r}, rng.integers(0, 10, n), labels).astype(np.uint8)\n"
        if flip
        else ""
    )
    return f"""
import numpy as np, os, struct
rng = np.random.default_rng(0)
raw = {raw!r}
os.makedirs(raw, exist_ok=True)
proto = (rng.random((10, 28, 28)) < 0.25) * 200.0
def write(prefix, n):
    labels = rng.integers(0, 10, n).astype(np.uint8)
    imgs = np.clip(proto[labels] + rng.random((n, 28, 28)) * 55, 0, 255).astype(np.uint8)
{relabel}    with open(os.path.join(raw, prefix + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, 28, 28)); f.write(imgs.tobytes())
    with open(os.path.join(raw, prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 2049, n)); f.write(labels.tobytes())
write("train", {n_train})
write("t10k", {n_test})
"""


#: Cora's cora.content (2,708 papers, 1,433 binary word attributes, 7 class names), synthetic: the mirrors of pygcn
#: and pyGAT hold the committed cora.cites but not cora.content (a blob the fetch left out). One line per paper id of
#: cora.cites, in the order they first appear there; the class is drawn at random, and each class has 30 words that
#: its papers use with probability 0.3 (0.01 for the rest), so that the graph networks have something to learn.
CORA_CONTENT = """
import numpy as np
rng = np.random.default_rng(0)
ids = list(dict.fromkeys(open("data/cora/cora.cites").read().split()))
classes = ["Case_Based", "Genetic_Algorithms", "Neural_Networks", "Probabilistic_Methods",
           "Reinforcement_Learning", "Rule_Learning", "Theory"]
labels = rng.integers(0, 7, len(ids))
p = np.full((7, 1433), 0.01)
for c in range(7):
    p[c, rng.choice(1433, 30, replace=False)] = 0.3
words = (rng.random((len(ids), 1433)) < p[labels]).astype(int)
with open("data/cora/cora.content", "w") as f:
    for i, w, c in zip(ids, words, labels):
        f.write(i + "\\t" + "\\t".join(map(str, w)) + "\\t" + classes[c] + "\\n")
"""

#: going_modular's pizza_steak_sushi (ImageFolder train/ and test/, a folder a class), synthetic: 24 training and 8
#: test JPEGs a class, 96x96, a class-coloured gradient with seeded noise (the script resizes them to 64x64).
PIZZA_STEAK_SUSHI = """
import numpy as np, os
from PIL import Image
rng = np.random.default_rng(0)
base = {"pizza": (200, 60, 40), "steak": (120, 70, 50), "sushi": (230, 230, 220)}
for split, n in (("train", 24), ("test", 8)):
    for cls, rgb in base.items():
        d = f"data/pizza_steak_sushi/{split}/{cls}"
        os.makedirs(d, exist_ok=True)
        for k in range(n):
            ramp = np.linspace(0.5, 1.0, 96)[None, :, None]
            img = np.array(rgb)[None, None, :] * ramp + rng.normal(0, 30, (96, 96, 3))
            Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(f"{d}/{k}.jpg")
"""


def _ltsf(model: str, amp: bool = False) -> Script:
    """LTSF-Linear's ``run_longExp.py`` as etth1.sh's first run (3 of its 10 epochs, then the test), optionally
    with --use_amp (see the entries in SCRIPTS)."""
    args = "--des Exp --itr 1 --batch_size 32 --learning_rate 0.005 --train_epochs 3" + (
        " --use_amp" if amp else ""
    )
    what = "with bf16 autocast, " if amp else ""
    device = "" if amp else "device = 'cuda:{}'.format(args.gpu) if args.use_gpu; "
    return Script(
        f"LTSF-Linear run_longExp.py --model {model}{' --use_amp' if amp else ''} (etth1.sh's first run {what}"
        f"3 epochs, then the test; {device}synthetic ETTh1)",
        "cure-lab/LTSF-Linear",
        ".",
        (
            "-u",
            "run_longExp.py",
            *"--is_training 1 --root_path ./dataset/ --data_path ETTh1.csv --model_id ETTh1_336_96".split(),
            *f"--model {model} --data ETTh1 --features M --seq_len 336 --pred_len 96 --enc_in 7".split(),
            *args.split(),
        ),
        r"loss: ([\d.]+)|Train Loss: ([\d.]+) Vali Loss: ([\d.]+) Test Loss: ([\d.]+)|mse:([\d.]+), mae:([\d.]+)",
        # bf16 matmuls, PyTorch's CPU kernels against XLA's: the numbers differ by 0.10% (DLinear) and 0.12%
        # (NLinear) at most (DLinear's first training loss 0.0609483 / 0.0609691, its test mse 0.0499246 /
        # 0.0499293); without amp the script prints 7 decimals
        rtol=3e-3 if amp else 1e-4,
        atol=1e-6,
        cpu_patch=(
            ("exp/exp_main.py", 'torch.cuda.amp.autocast()=>torch.autocast("cpu", dtype=torch.bfloat16)'),
            (
                "exp/exp_main.py",
                "outputs = outputs.detach().cpu().numpy()=>outputs = outputs.detach().cpu().float().numpy()",
            ),
        )
        if amp
        else (),
        manifest="migrate_corpus_heldout19.txt",
        setup=ETT_CSV.replace("dataset/ETT-small", "dataset"),
        compat="numpy.Inf = numpy.inf\n",  # utils/tools.py's EarlyStopping: self.val_loss_min = np.Inf
        needs=("pandas", "sklearn", "matplotlib"),
    )


#: What rasbt/deeplearning-models's MNIST notebooks print: the training cost of every 50th batch ("Cost: 0.1234"),
#: the accuracies after each epoch and at the end ("training accuracy: 91.23%", "Train: 91.234%", "Test accuracy:
#: 90.12%", "Probability 7 12.34%") -- not the "Time elapsed" lines.
DLM_NUMBERS = r"Cost: ([\d.]+)|accuracy: ([\d.]+)%|Train: ([\d.]+)%|Probability 7 ([\d.]+)%"


def _pytorch_gan(name: str, what: str) -> Script:
    """PyTorch-GAN's implementations/<name>/<name>.py as its README runs it (python3 <name>.py, in its folder), for
    one epoch (--n_epochs 1, no image saved) of a synthetic MNIST of 640 images (10 batches of 64) in the
    ../../data/mnist its datasets.MNIST(..., download=True) reads; the noise it draws with np.random.normal is seeded
    by the hook on both sides. Its losses print 6 decimals; float32 sums in another order part in the 6th (gan's last
    G loss: 0.620336 on the CPU, 0.620335 on the "tpu"), so 1e-5 absolute."""
    return Script(
        f"PyTorch-GAN {name}.py ({what}; 1 epoch, synthetic MNIST)",
        "eriklindernoren/PyTorch-GAN",
        f"implementations/{name}",
        (f"{name}.py", "--n_epochs", "1", "--sample_interval", "100000"),
        r"(?:D|G) loss: (-?[\d.]+(?:e[+-]?\d+)?)",
        rtol=1e-4,
        atol=1e-5,
        manifest="migrate_corpus_heldout5.txt",
        setup=_mnist_idx("../../data/mnist/MNIST/raw", 640, 160),
        needs=("torchvision",),
    )


def _dlm(notebook: str, what: str, cuda: str = "") -> Script:
    """One notebook of rasbt/deeplearning-models's pytorch_ipynb/, run unedited as Jupyter runs it (NB_DRIVER) in
    its own folder (extracted and migrated whole; none of these imports the repository's helper_*.py), on a small
    synthetic MNIST in the data/MNIST/raw that its datasets.MNIST(root='data', download=True) looks in: 640 training
    and 160 test images (torchvision finds the raw files and downloads nothing), a quarter of their labels redrawn
    at random so that the accuracies stay below 100%. Each side runs in a fresh kernel and the notebooks seed
    themselves (torch.manual_seed before the model; the DataLoader's shuffling draws from the CPU generator on both
    sides). Tolerance: every printed digit (the costs have 4 decimals, the accuracies 2 or 3). ``cuda``: a
    hard-coded ``DEVICE = "cuda:N"`` that the CPU reference alone gets as "cpu" (the migrated copy gets "tpu")."""
    folder, name = notebook.rsplit("/", 1)
    return Script(
        f"deeplearning-models {notebook} ({what}; synthetic MNIST)",
        "rasbt/deeplearning-models",
        f"pytorch_ipynb/{folder}",
        (name,),
        DLM_NUMBERS,
        timeout=600,
        # (the notebook is JSON: its source's quotes are escaped there)
        cpu_patch=((name, f'DEVICE = \\"{cuda}\\"=>DEVICE = \\"cpu\\"'),) if cuda else (),
        rtol=0.0,
        atol=1.01e-4,
        manifest="migrate_corpus_heldout20.txt",
        setup=_mnist_idx("data/MNIST/raw", 640, 160, flip=0.25),
        needs=("torchvision", "nbclient", "ipykernel"),
    )


#: What pykan prints: each model.fit's progress bar as tqdm leaves it (its last refresh before the "saving model
#: version" line that every fit ends with: "| train_loss: 1.85e-02 | test_loss: 1.77e-02 | reg: 6.93e+00 |"), the r2
#: of each symbolic fit ("r2 is 0.97854", "with sin, r2=0.99999991") and get_range's "x range: [-1.61 , 3.38 ]"
PYKAN_NUMBERS = (
    r"train_loss: (\S+) \| test_loss: (\S+) \| reg: (\S+) \|(?:(?!train_loss)[\s\S])*?saving model version"
    r"|r2(?: is |=)(-?[\d.]+(?:e-?\d+)?)|range: \[(-?[\d.]+) , (-?[\d.]+) \]"
)


def _pykan(notebook: str, what: str, rtol: float, atol: float) -> Script:
    """One of pykan's notebooks, run unedited as Jupyter runs it (NB_DRIVER) in its own folder, with the
    repository's (migrated) kan package importable, as the README's `pip install -e .` makes it (the whole
    repository is extracted and migrated). Its KAN(..., seed=N) seeds torch, NumPy and random; models are built and
    datasets drawn on the CPU, then moved to the device."""
    return Script(
        f"pykan {notebook} ({what}; device = 'cuda' if cuda.is_available())",
        "KindXiaoming/pykan",
        ".",
        (notebook,),
        PYKAN_NUMBERS,
        timeout=900,
        rtol=rtol,
        atol=atol,
        manifest="migrate_corpus_heldout25.txt",
        env=(("PYTHONPATH", "{root}"),),
        needs=("sympy", "sklearn", "pandas", "yaml", "matplotlib", "nbclient", "ipykernel"),
    )


#: enwik8.gz for PaLM-rlhf-pytorch's train.py (the mirror lacks the committed one), synthetic: 90,100,000 bytes (the
#: script reads 95e6 at most and splits the training set at 90e6, so the validation set has 100,000): 8-letter
#: lower-case "words" drawn (seeded) from a lexicon of 4,096, 5% of the bytes made spaces; gzip level 1.
ENWIK8_GZ = """
import gzip, os, numpy as np
rng = np.random.default_rng(0)
n = 90_100_000
words = rng.integers(97, 123, (4096, 8), dtype=np.uint8)
data = words[rng.integers(0, 4096, n // 8)].reshape(-1)
data[rng.random(data.size) < 0.05] = 32
os.makedirs("data", exist_ok=True)
with gzip.open("data/enwik8.gz", "wb", compresslevel=1) as f:
    f.write(data.tobytes())
"""


#: A hub model that a sentence-transformers example names, synthetic, written into the Hugging Face cache that the
#: run's HF_HOME points at (the run is offline: HF_HUB_OFFLINE=1 resolves the name there and downloads nothing): the
#: architecture and sizes of the named model, its weights randomly initialised (seeded), and a tokenizer whose vocabulary
#: is single characters (BERT's WordPiece: a-z, digits, punctuation and their ##-continuations; RoBERTa's byte-level
#: BPE: the 256 byte symbols, no merges), so that every sentence tokenizes without the real vocabulary. ``kind``:
#: "bi" (all-MiniLM-L6-v2: BertModel 6x384, mean pooling, normalisation), "splade" (a BertForMaskedLM 12x768 with
#: SpladePooling), "cross" (stsb-distilroberta-base: RobertaForSequenceClassification 6x768, one label, sigmoid),
#: "distil" (quora-distilbert-multilingual: DistilBertModel 6x768, mean pooling, no normalisation). (The WordPiece
#: vocabulary file is passed positionally: transformers 5's BertTokenizerFast ignores ``vocab_file=`` and keeps only
#: the 5 special tokens, which made every word "[UNK]".)
ST_HUB = """
import json, os, string, sys, torch, transformers as tf
repo_id, kind = sys.argv[1], sys.argv[2]
cache = os.path.join(".hf_home", "hub", "models--" + repo_id.replace("/", "--"))
snap = os.path.join(cache, "snapshots", "0" * 40)
os.makedirs(os.path.join(cache, "refs"), exist_ok=True)
with open(os.path.join(cache, "refs", "main"), "w") as f:
    f.write("0" * 40)
os.makedirs(snap, exist_ok=True)
def dump(path, obj):
    os.makedirs(os.path.dirname(os.path.join(snap, path)), exist_ok=True)
    with open(os.path.join(snap, path), "w") as f:
        json.dump(obj, f)
torch.manual_seed(0)
if kind in ("bi", "splade", "distil"):
    chars = string.ascii_lowercase + string.digits + string.punctuation
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *("##" + c for c in chars)]
    with open(os.path.join(snap, "vocab.txt"), "w") as f:
        f.write("\\n".join(vocab) + "\\n")
    tok = tf.DistilBertTokenizerFast if kind == "distil" else tf.BertTokenizerFast
    tok(os.path.join(snap, "vocab.txt"), do_lower_case=True).save_pretrained(snap)
if kind == "bi":
    cfg = tf.BertConfig(vocab_size=len(vocab), hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                        intermediate_size=1536)
    tf.BertModel(cfg).save_pretrained(snap)
    dump("modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])
    dump("sentence_bert_config.json", {"max_seq_length": 256, "do_lower_case": False})
    dump("1_Pooling/config.json", {"word_embedding_dimension": 384, "pooling_mode_mean_tokens": True})
    os.makedirs(os.path.join(snap, "2_Normalize"), exist_ok=True)
elif kind == "distil":
    tf.DistilBertModel(tf.DistilBertConfig(vocab_size=len(vocab))).save_pretrained(snap)
    dump("modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])
    dump("sentence_bert_config.json", {"max_seq_length": 128, "do_lower_case": False})
    dump("1_Pooling/config.json", {"word_embedding_dimension": 768, "pooling_mode_mean_tokens": True})
elif kind == "splade":
    cfg = tf.BertConfig(vocab_size=len(vocab))
    tf.BertForMaskedLM(cfg).save_pretrained(snap)
    dump("modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.sparse_encoder.models.MLMTransformer"},
        {"idx": 1, "name": "1", "path": "1_SpladePooling",
         "type": "sentence_transformers.sparse_encoder.models.SpladePooling"}])
    dump("sentence_bert_config.json", {"max_seq_length": 256, "do_lower_case": False})
    dump("1_SpladePooling/config.json", {"pooling_strategy": "max", "activation_function": "relu",
                                         "word_embedding_dimension": len(vocab)})
    dump("config_sentence_transformers.json", {"model_type": "SparseEncoder", "similarity_fn_name": "dot"})
else:
    from tokenizers.pre_tokenizers import ByteLevel
    vocab = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>", "<mask>", *sorted(ByteLevel.alphabet())])}
    dump("vocab.json", vocab)
    with open(os.path.join(snap, "merges.txt"), "w") as f:
        f.write("#version: 0.2\\n")
    tf.RobertaTokenizerFast(os.path.join(snap, "vocab.json"), os.path.join(snap, "merges.txt")).save_pretrained(snap)
    cfg = tf.RobertaConfig(vocab_size=len(vocab), num_hidden_layers=6, num_labels=1, pad_token_id=1,
                           bos_token_id=0, eos_token_id=2, max_position_embeddings=514, type_vocab_size=1)
    cfg.sentence_transformers = {"activation_fn": "torch.nn.modules.activation.Sigmoid"}
    tf.RobertaForSequenceClassification(cfg).save_pretrained(snap)
"""


#: Every decimal number a run prints (not integers, not parts of words, times or versions): for examples whose
#: printed output is their numbers and sentences.
FLOATS = r"(?<![\w.:-])(-?\d+\.\d+(?:e[-+]?\d+)?)(?![\w.:])"


#: quora_duplicate_questions.tsv (the Quora Duplicate Questions file that sentence-transformers's Quora examples read,
#: or download when it is absent), synthetic: 600 pairs in its columns (id, qid1, qid2, question1, question2,
#: is_duplicate), the questions drawn (seeded) from templates and word lists, so of varied lengths.
QUORA_TSV = """
import random
rng = random.Random(0)
starts = ["How can I", "What is the best way to", "Why do people", "Is it possible to", "Where should I",
          "When is the right time to", "Which is the easiest way to", "What happens if I"]
verbs = ["learn", "improve", "start", "find", "stop", "understand", "choose", "build", "sell", "visit"]
objs = ["Python", "machine learning", "my English", "a good job", "weight", "a startup", "Goa", "Quora followers",
        "the stock market", "a new phone", "India", "my exams", "programming", "a healthy diet", "guitar"]
ends = ["", " fast", " at home", " without money", " in 2017", " as a beginner", " in India", " online",
        " after college", " for free"]
def q():
    return f"{rng.choice(starts)} {rng.choice(verbs)} {rng.choice(objs)}{rng.choice(ends)}?"
with open("quora_duplicate_questions.tsv", "w", encoding="utf8") as f:
    f.write("id\\tqid1\\tqid2\\tquestion1\\tquestion2\\tis_duplicate\\n")
    for i in range(600):
        f.write(f"{i}\\t{2 * i + 1}\\t{2 * i + 2}\\t{q()}\\t{q()}\\t{rng.randint(0, 1)}\\n")
"""


def _st(script: str, what: str, model: str, kind: str, numbers: str, data: str = "", **kw: object) -> Script:
    """One of sentence-transformers's examples, run as its README says (python examples/.../X.py, from the
    repository's root) with the repository's (migrated) package importable, as `pip install -e .` makes it (the whole
    repository is extracted and migrated); the model it names is a synthetic one in an offline hub cache (ST_HUB).
    The package picks its device itself (util/environment.py's get_device_name: "cuda" if torch.cuda.is_available(),
    which the migration turns into the TPU's test). ``data``: a further setup (a synthetic file the example reads)."""
    return Script(
        f"sentence-transformers {script} ({what}; synthetic {model}, random weights)",
        "UKPLab/sentence-transformers",
        ".",
        (script,),
        numbers,
        timeout=600,
        manifest="migrate_corpus_heldout27.txt",
        setup=f"import sys; sys.argv = ['', {model!r}, {kind!r}]\n" + ST_HUB + data,
        env=(("PYTHONPATH", "{root}"), ("HF_HOME", "{root}/.hf_home"), ("HF_HUB_OFFLINE", "1")),
        needs=("transformers", "sklearn", "scipy"),
        **kw,  # type: ignore[arg-type]
    )


SCRIPTS = [
    *(
        Script(
            f"RWKV-v8 {stem}.py (inference, committed weights, as-is)",
            "BlinkDL/RWKV-LM",
            "RWKV-v8",
            (f"{stem}.py",),
            r"correct (\d+)/(\d+)",
            cpu_patch=((f"{stem}.py", "device='cuda'=>device='cpu'"),),
            rtol=0.0,
            atol=0.0,
        )
        for stem in (
            "251016_rosa_1bit_run",
            "251018_rosa_4bit_run",
        )
    ),
    *(
        Script(
            f"LLMs-from-scratch appendix-A {script} (DDP training, toy data, as-is)",
            "rasbt/LLMs-from-scratch",
            "appendix-A/01_main-chapter-code",
            (script,),
            r"Train/Val Loss: ([\d.]+)|accuracy ([\d.]+)",
            cpu_patch=tuple(
                (script, spec)
                for spec in (
                    'backend="nccl"=>backend="gloo"',
                    "torch.cuda.set_device(rank)=>pass",
                    "model.to(rank)=>model.to('cpu')",
                    "DDP(model, device_ids=[rank])=>DDP(model)",
                    "features.to(rank), labels.to(rank)=>features.to('cpu'), labels.to('cpu')",
                    "train_loader, device=rank)=>train_loader, device='cpu')",
                    "test_loader, device=rank)=>test_loader, device='cpu')",
                    *extra,
                )
            ),
            atol=0.0051,  # the script prints losses with 2 decimals
        )
        for script, extra in (
            ("DDP-script-torchrun.py", ()),
            ("DDP-script.py", ("world_size = torch.cuda.device_count()=>world_size = 1",)),
        )
    ),
    Script(
        "RWKV-v8 251014_rosa_onlyemb_train.py (train 1000 steps, synthetic digit sequences, as-is)",
        "BlinkDL/RWKV-LM",
        "RWKV-v8",
        ("251014_rosa_onlyemb_train.py",),
        r"loss ([\d.]+)|correct (\d+)/",
        timeout=1500,
        cpu_patch=(("251014_rosa_onlyemb_train.py", "device='cuda'=>device='cpu'"),),
        rtol=2e-3,
        atol=2e-3,
    ),
    Script(
        "ng-video-lecture bigram.py (3,000 training steps on the committed tinyshakespeare, then 500 sampled "
        "tokens; as-is)",
        "karpathy/ng-video-lecture",
        ".",
        ("bigram.py",),
        r"train loss ([\d.]+), val loss ([\d.]+)",
        timeout=1500,  # the sampling loop grows its input by one token a step: every step is a new shape to compile
        rtol=0.0,
        atol=1.01e-4,  # the script prints 4 decimals
    ),
    Script(
        "RWKV-v8 251014_rosa_1bit_layer.py (forward + backward of the 1-bit ROSA layer, as-is)",
        "BlinkDL/RWKV-LM",
        "RWKV-v8",
        ("251014_rosa_1bit_layer.py",),
        r"(-?\d+\.\d+(?:e[-+]?\d+)?)",
        cpu_patch=(
            ("251014_rosa_1bit_layer.py", "1e-3).cuda()=>1e-3)"),
            ("251014_rosa_1bit_layer.py", 'device="cuda"=>device="cpu"'),
        ),
        rtol=1e-5,
        atol=1e-7,
    ),
    # held-out 12 (benchmarks/migrate_corpus_heldout12.txt): four of Time-Series-Library's scripts, three models
    # and two tasks (its own requirements: sktime, datasets)
    *(
        _tsl(
            f"scripts/long_term_forecast/ETT_script/{model}_ETTh1.sh",
            f"--task_name long_term_forecast "
            f"--model_id ETTh1_96_96 --model {model} --label_len 48 --pred_len 96",
        )
        for model in ("DLinear", "LightTS", "TSMixer")
    ),
    _tsl(
        "scripts/imputation/ETT_script/DLinear_ETTh1.sh",
        "--task_name imputation --model_id ETTh1_mask_0.125 --mask_rate 0.125 --model DLinear --label_len 0 "
        "--pred_len 96 --batch_size 16 --d_model 128 --d_ff 128 --top_k 5 --learning_rate 0.001",
    ),
    # held-out 17 (benchmarks/migrate_corpus_heldout17.txt): tutorial scripts, run as-is on small synthetic MNIST /
    # Fashion-MNIST idx files (their own requirement: torchvision) or on their own toy data
    Script(
        "PyTorchZeroToAll 09_2_softmax_mnist.py (9 epochs of an MLP, device = 'cuda' if cuda.is_available(); "
        "synthetic MNIST)",
        "hunkim/PyTorchZeroToAll",
        ".",
        ("09_2_softmax_mnist.py",),
        r"Loss: ([\d.]+)|Average loss: ([\d.]+), Accuracy: (\d+)/",
        manifest="migrate_corpus_heldout17.txt",
        setup=_mnist_idx("mnist_data/MNIST/raw", 3200, 320),
        needs=("torchvision",),
    ),
    *(
        Script(
            f"pytorch-beginner {folder}/{script} ({epochs} epochs, use_gpu = torch.cuda.is_available(); "
            "synthetic Fashion-MNIST)",
            "L1aoXingyu/pytorch-beginner",
            folder,
            (script,),
            r"Loss: ([\d.]+), Acc: ([\d.]+)",
            manifest="migrate_corpus_heldout17.txt",
            setup=_mnist_idx("../datasets/FashionMNIST/raw", 640, 128),  # the scripts' root='../datasets',
            needs=("torchvision",),
        )
        for folder, script, epochs in (
            ("02-Logistic Regression", "Logistic_Regression.py", 100),
            ("03-Neural Network", "neural_network.py", 50),
        )
    ),
    Script(
        "pytorch-beginner 08-AutoEncoder/conv_autoencoder.py (100 epochs of a conv autoencoder, "
        "autoencoder().cuda(); synthetic MNIST)",
        "L1aoXingyu/pytorch-beginner",
        "08-AutoEncoder",
        ("conv_autoencoder.py",),
        r"loss:([\d.]+)",
        rtol=5e-3,  # identical to 4 decimals for ~60 epochs; then the CPU alone, run with 1 thread instead of 2, drifts
        # 0.32% by epoch 100 (the migrated run: 0.35%)
        cpu_patch=(
            ("conv_autoencoder.py", "autoencoder().cuda()=>autoencoder()"),
            ("conv_autoencoder.py", "Variable(img).cuda()=>Variable(img)"),
        ),
        manifest="migrate_corpus_heldout17.txt",
        setup=_mnist_idx("data/MNIST/raw", 512, 16),
        needs=("torchvision",),
    ),
    Script(
        "Lightning tutorials UvA-DL 01-introduction-to-pytorch notebook.py (the XOR classifier trained 100 epochs on "
        "the device, then evaluated; as-is)",
        "Lightning-AI/tutorials",
        "course_UvA-DL/01-introduction-to-pytorch",
        ("notebook.py",),
        # the trained parameters it prints three times (4 decimals), then the test accuracy
        r"'linear2\.weight', tensor\(\[\[(-?[\d.]+), +(-?[\d.]+), +(-?[\d.]+), +(-?[\d.]+)\]\]"
        r"|'linear\d\.bias', tensor\(\[ *(-?[\d.]+)(?:, +(-?[\d.]+), +(-?[\d.]+), +(-?[\d.]+))?\]"
        r"|Accuracy of the model: ([\d.]+)%",
        rtol=0.0,
        atol=1.01e-4,
        manifest="migrate_corpus_heldout17.txt",
        needs=("matplotlib", "matplotlib_inline", "tqdm", "ipywidgets"),
    ),
    # held-out 18 (benchmarks/migrate_corpus_heldout18.txt): torchdiffeq's latent-ODE example run as-is on its own
    # synthetic spirals, from the repository root as a module so that it imports the repository's (migrated)
    # torchdiffeq (its own requirement: matplotlib)
    Script(
        "torchdiffeq examples/ode_demo.py (fits an ODE to its synthetic spiral, 100 iterations, "
        "device = 'cuda:' + str(args.gpu) if cuda.is_available(); batches drawn with NumPy)",
        "rtqichen/torchdiffeq",
        ".",
        ("-m", "examples.ode_demo", "--niters", "100"),
        r"Total Loss (-?[\d.]+)",
        rtol=1e-4,
        atol=1e-6,  # the script prints 6 decimals
        manifest="migrate_corpus_heldout18.txt",
    ),
    Script(
        "torchdiffeq examples/latent_ode.py (latent ODE VAE on its synthetic spirals, 30 iterations, "
        "device = 'cuda:' + str(args.gpu) if cuda.is_available())",
        "rtqichen/torchdiffeq",
        ".",
        ("-m", "examples.latent_ode", "--niters", "30"),
        r"running avg elbo: (-?[\d.]+)",
        manifest="migrate_corpus_heldout18.txt",
        needs=("matplotlib",),
    ),
    # held-out 18: DomainBed's training script on its synthetic Debug28 domains (its own requirements: torchvision,
    # timm, wilds)
    Script(
        "DomainBed domainbed/scripts/train.py (ERM on the synthetic Debug28 domains, 101 steps, evaluated every 25; "
        "device = 'cuda' if cuda.is_available())",
        "facebookresearch/DomainBed",
        ".",
        (
            "-m",
            "domainbed.scripts.train",
            "--dataset",
            "Debug28",
            "--algorithm",
            "ERM",
            "--steps",
            "101",
            "--checkpoint_freq",
            "25",
            "--skip_model_save",
            "--output_dir",
            "train_output",
        ),
        # a results row: the six accuracies, epoch, loss, (mem_gb,) step
        r"(?m)^(\d\.\d+) +(\d\.\d+) +(\d\.\d+) +(\d\.\d+) +(\d\.\d+) +(\d\.\d+) +([\d.]+) +([\d.]+) +\S+ +(\d+) ",
        manifest="migrate_corpus_heldout18.txt",
        needs=("torchvision", "timm", "wilds"),
    ),
    # held-out 18: vector-quantize-pytorch's example autoencoders on synthetic Fashion-MNIST idx files in their
    # root='~/data/fashion_mnist' (their own requirements: torchvision, einops, einx, fire, tqdm; FVQ's also
    # x-transformers), run from the repository root as modules so that they import the repository's (migrated) package
    *(
        Script(
            f"vector-quantize-pytorch examples/{stem}.py (100 training steps of its {what} autoencoder, "
            "device = 'cuda' if cuda.is_available(); synthetic Fashion-MNIST)",
            "lucidrains/vector-quantize-pytorch",
            ".",
            ("-m", f"examples.{stem}", "--train_iter", "100"),
            # the losses of the last step as tqdm shows them at the end: tqdm shows a step's description once, twice
            # or with another step's count (it also refreshes on a timer), so the steps in between do not line up;
            # "active %" (distinct codes in the batch, 0.39% a code) is not compared: a near-tie in the nearest
            # code can flip it by a code on either side
            r"rec loss: ([\d.]+) \| (?:[a-z ]+ loss: (-?[\d.]+) \| )?active %(?![\s\S]*rec loss)",
            atol=2.01e-3,  # the script prints 3 decimals
            manifest="migrate_corpus_heldout18.txt",
            setup=_mnist_idx(os.path.expanduser("~/data/fashion_mnist/FashionMNIST/raw"), 2560, 16),
            needs=("torchvision", "einops", "einx", "fire", "tqdm", *more),
        )
        for stem, what, more in (
            ("autoencoder", "VQ", ()),
            ("autoencoder_fsq", "FSQ", ()),
            ("autoencoder_lfq", "LFQ", ()),
            ("autoencoder_sim_vq", "SimVQ", ()),
            ("autoencoder_hq", "HQ", ()),
            # its encoder and decoder are x-transformers Encoders
            ("autoencoder_fvq", "FVQ", ("x_transformers",)),
            ("autoencoder_fsp", "FSP", ()),
        )
    ),
    # held-out 18: FFJORD's toy 2-D density scripts as its README runs them, on --data circles rather than the
    # README's 8gaussians: 8gaussians (like pinwheel, the default, and rings) draws from np.random.RandomState(),
    # seeded from the OS on every call, so no two runs see the same batches; circles draws from sklearn's
    # make_circles on NumPy's global generator, which the hook seeds (their own requirements: matplotlib,
    # scikit-learn, torchdiffeq)
    Script(
        "ffjord train_toy.py (FFJORD continuous normalizing flow on the circles toy density, 20 iterations and the "
        "test loss; device = 'cuda:' + str(args.gpu) if cuda.is_available())",
        "rtqichen/ffjord",
        ".",
        (
            "train_toy.py",
            *"--data circles --dims 64-64-64 --layer_type concatsquash --save experiment1 --niters 20".split(),
        ),
        # each iteration's loss and the dopri5 solver's step counts (an integer that moves if the solver's
        # accept/reject decisions do), then the test loss
        r"\| Loss (-?[\d.]+)\(|NFE Forward (\d+)\(|NFE Backward (\d+)\(|Test Loss (-?[\d.]+)",
        rtol=1e-4,
        atol=1e-6,  # the script prints 6 decimals
        manifest="migrate_corpus_heldout18.txt",
        needs=("matplotlib", "sklearn", "torchdiffeq"),
        # after training it integrates an 800x800 grid through the flow at 101 times (not done after 5 minutes on
        # the CPU) and then plots it with matplotlib.cm.get_cmap, gone since matplotlib 3.9, and
        # Axes.set_axis_bgcolor, gone since 2.2: it cannot end on either side. (The migrated run stops sooner, at
        # once: torch.linspace(0, end_time, 101), end_time a 0-dim "tpu" tensor, raises "Expected all tensors to be
        # on the same device ... tpu:0 and cpu", where CUDA's linspace takes end_time.item().)
        stop_at=r"(?m)^Training has finished\.",  # (its log starts with its own source, where the line is indented)
    ),
    # its README: "Glow / Real NVP experiments are run using train_discrete_toy.py" (--glow True puts a learned
    # 2x2 linear layer before each coupling layer)
    *(
        Script(
            f"ffjord train_discrete_toy.py{flag} ({what} flow on the circles toy density, 500 iterations and the test "
            "loss; device = 'cuda:' + str(args.gpu) if cuda.is_available())",
            "rtqichen/ffjord",
            ".",
            ("train_discrete_toy.py", *f"--data circles --save experiment1 --niters 500{flag}".split()),
            r"\| Loss (-?[\d.]+)\(|Test Loss (-?[\d.]+)",  # every 100 iterations (its --log_freq), then the test
            rtol=1e-4,
            atol=1e-6,  # the script prints 6 decimals
            manifest="migrate_corpus_heldout18.txt",
            needs=("matplotlib", "sklearn"),
        )
        for flag, what in (("", "Real NVP coupling"), (" --glow True", "Glow"))
    ),
    # held-out 18: Augmented Neural ODEs' image experiment as its README runs it (python main_experiment_img.py
    # config_img.json), with the committed config's models and a shorter training config, on a small synthetic
    # MNIST in the loader's '../../mnist_data' (its own requirements: torchvision, imageio, matplotlib,
    # torchdiffeq). Its toy-data experiment, main_experiment.py, is not here: it hard-codes
    # device = torch.device('cpu'), so there is nothing to migrate and nothing would run on the "tpu"
    Script(
        "augmented-neural-odes main_experiment_img.py (ANODE and NODE conv models of config_img.json, 2 epochs of 4 "
        "batches each, adjoint dopri5; device = 'cuda' if cuda.is_available(); synthetic MNIST)",
        "EmilienDupont/augmented-neural-odes",
        ".",
        ("main_experiment_img.py", "config_img_short.json"),
        # every iteration's loss and forward / backward (adjoint) solver steps, and each epoch's mean loss
        r"(?m)^Loss: ([\d.]+)|^NFE: (\d+)|^BNFE: (\d+)|^Epoch \d+: ([\d.]+)",
        # the script prints 3 decimals; the first epoch of each model agrees to the last digit, then the CPU alone,
        # run with 1 thread instead of 2, drifts by up to 0.94% by the 8th step (1.287 -> 1.275; the migrated run:
        # 0.36%, 1.125 -> 1.129); the solver step counts stay equal
        rtol=1e-2,
        atol=1.01e-3,
        manifest="migrate_corpus_heldout18.txt",
        setup=_mnist_idx("../../mnist_data/MNIST/raw", 64, 16)
        + """
import json
cfg = json.load(open("config_img.json"))
# one repetition (not 5) of 2 epochs (not 20) of batches of 16 (not 256), every iteration printed
cfg["num_reps"] = 1
cfg["training_config"].update(batch_size=16, print_freq=1, record_freq=1, epochs=2)
json.dump(cfg, open("config_img_short.json", "w"), indent=2)
""",
        needs=("torchvision", "imageio", "matplotlib", "torchdiffeq"),
    ),
    # held-out 19 (benchmarks/migrate_corpus_heldout19.txt): pyGAT's train.py as its README runs it (python
    # train.py, from the repository root), on the committed cora.cites and a synthetic cora.content, for 8 of its
    # 10,000 epochs (its --patience 100 would not stop it sooner); it saves a checkpoint every epoch and reloads the
    # best one for the test, so the reload (torch.load, given map_location by the tool) is run too. --dropout 0:
    # the "tpu" draws its dropout masks from its own generator (as CUDA does), so with the default 0.6 the first
    # training loss already differs (1.9477 on the CPU, 1.9469 on the "tpu"; the eval-mode validation loss of that
    # epoch agrees); without dropout every printed digit agrees. Its per-epoch validation forward runs with grad
    # enabled and no backward: until 2026-12-06 the "tpu" kept each such graph's saved outputs (9.0 GB after 8
    # epochs, killed by the OOM killer at 24 GB in epoch 30; tests/backend/test_saved_output_cycle.py); since, 20
    # epochs peak at 2.88 GB resident (/usr/bin/time -v, OMP_NUM_THREADS=1), as the CPU run's 2.8 GB
    *(
        Script(
            f"pyGAT train.py{flag} ({what} on Cora with a synthetic cora.content, 8 epochs without dropout, then "
            "the best epoch reloaded and tested; args.cuda = torch.cuda.is_available())",
            "Diego999/pyGAT",
            ".",
            ("train.py", "--epochs", "8", "--dropout", "0", *flag.split()),
            r"loss_train: ([\d.]+) acc_train: ([\d.]+) loss_val: ([\d.]+) acc_val: ([\d.]+)"
            r"|Loading (\d+)th epoch|loss= ([\d.]+) accuracy= ([\d.]+)",
            rtol=0.0,
            atol=1.01e-4,  # the script prints 4 decimals
            manifest="migrate_corpus_heldout19.txt",
            setup=CORA_CONTENT,
            needs=("scipy",),
        )
        for flag, what in (
            ("", "dense GAT"),
            (" --sparse", "sparse GAT, its own sparse-matrix autograd Function"),
        )
    ),
    # held-out 19: LTSF-Linear's linear forecasters, each as the first run of scripts/EXP-LongForecasting/Linear/
    # etth1.sh, on a synthetic ETTh1.csv in its --root_path ./dataset/, for 3 of its 10 epochs (its own
    # requirements: pandas, scikit-learn, matplotlib); the CPU reference needs no patch: run_longExp.py turns
    # --use_gpu off itself where CUDA is not there
    *(_ltsf(model) for model in ("DLinear", "NLinear", "Linear")),
    # the same with --use_amp (torch.cuda.amp.autocast(), float16, becomes bfloat16 autocast on the "tpu", and the
    # test's outputs.numpy() of its bfloat16 outputs becomes .float().numpy()): the CPU reference alone gets the
    # same, as CPU autocast -- CUDA's autocast would switch itself off there and leave it in float32
    *(_ltsf(model, amp=True) for model in ("DLinear", "NLinear")),
    # held-out 19: pytorch-deep-learning's going_modular train.py as its notebook runs it (!python
    # going_modular/train.py, from going_modular/), TinyVGG for its 5 epochs on a synthetic pizza_steak_sushi (its
    # own requirement: torchvision); it seeds nothing, the hook does
    Script(
        "pytorch-deep-learning going_modular/train.py (TinyVGG, 5 epochs; device = 'cuda' if "
        "cuda.is_available(); synthetic pizza_steak_sushi)",
        "mrdbourke/pytorch-deep-learning",
        "going_modular",
        ("going_modular/train.py",),
        r"train_loss: ([\d.]+) \| train_acc: ([\d.]+) \| test_loss: ([\d.]+) \| test_acc: ([\d.]+)",
        rtol=0.0,
        atol=1.01e-4,  # the script prints 4 decimals
        manifest="migrate_corpus_heldout19.txt",
        setup=PIZZA_STEAK_SUSHI,
        needs=("torchvision",),
    ),
    # Not here from held-out 19: pygcn's pygcn/train.py -- the tool keeps its args.cuda = ... torch.cuda.is_available()
    # as CUDA's check (its adjacency is a sparse tensor), so the migrated run never puts a tensor on the "tpu" (its
    # hook reports "cpu" only); tiny-diffusion's ddpm.py -- it names no device (its CPU run is the whole run), and
    # the tool changes only vis.ipynb; Conditional_Diffusion_MNIST's script.py -- 20 epochs of 400-step sampling
    # hard-coded, and its context dropout (torch.bernoulli on the device) draws from the "tpu"'s own generator;
    # Deep-reinforcement-learning-with-pytorch -- `import gym` (absent here; gymnasium's API differs);
    # rainbow-is-all-you-need -- marimo notebooks (marimo absent); schedule_free's examples/mnist/main.py (python
    # main.py in examples/mnist with the repository's schedulefree on PYTHONPATH, 2 epochs, synthetic MNIST) runs on
    # the "tpu" to the end, but its Net's two Dropout layers draw their masks from the "tpu"'s own generator: the
    # very first training loss, before any step, already differs (2.345949 on the CPU, 2.316275 on the "tpu"), and
    # the script has no flag to turn dropout off
    # held-out 20 (benchmarks/migrate_corpus_heldout20.txt): rasbt/deeplearning-models's course notebooks, each run
    # whole, unedited, as Jupyter runs it (see _dlm and NB_DRIVER); the tool rewrites their torch.device("cuda:N" if
    # torch.cuda.is_available() else "cpu") to "tpu" (torch.accelerator.is_available()) and drops the
    # cudnn.deterministic line; their %watermark cells get the stand-in extension (WATERMARK). Each takes 8-27 s a
    # side here.
    _dlm("mlp/mlp-basic.ipynb", "MLP, 2 hidden layers, 10 epochs of SGD"),
    _dlm("mlp/mlp-batchnorm.ipynb", "MLP with BatchNorm1d, 10 epochs of SGD; eval-mode running statistics"),
    _dlm("mechanics/mlp-sequential.ipynb", "MLP as nn.Sequential with in-place ReLU, 10 epochs of SGD"),
    _dlm("basic-ml/softmax-regression.ipynb", "softmax regression, 10 epochs of SGD"),
    _dlm("autoencoder/ae-basic.ipynb", "fully connected autoencoder, 5 epochs of Adam"),
    _dlm("autoencoder/ae-deconv.ipynb", "convolutional autoencoder with ConvTranspose2d, 10 epochs of Adam"),
    _dlm(
        "autoencoder/ae-conv-nneighbor.ipynb",
        "convolutional autoencoder with nearest-neighbour F.interpolate, 10 epochs of Adam",
    ),
    _dlm("cnn/cnn-basic.ipynb", "2-conv CNN, 10 epochs of SGD"),
    _dlm("cnn/cnn-he-init.ipynb", "CNN with kaiming_normal_ init, 10 epochs of SGD"),
    _dlm(
        "cnn/cnn-standardized.ipynb",
        "CNN on inputs standardized by the training set's mean and std, 10 epochs",
    ),
    _dlm("cnn/cnn-allconv.ipynb", "all-convolutional net, 15 epochs of Adam"),
    _dlm(
        "mechanics/cnn-weight-sharing.ipynb",
        "CNN whose 10 logits share one Linear unit, a bias each, 10 epochs of SGD",
    ),
    # its DEVICE = "cuda:1" is hard-coded (no is_available check): the CPU reference alone gets "cpu"; it also
    # prints one test image's probability of a 7
    _dlm("cnn/cnn-lenet5-mnist.ipynb", "LeNet-5 on 32x32 resized images, 10 epochs of Adam", cuda="cuda:1"),
    # Not here from held-out 20 (all run to the end on the "tpu"; their numbers part from the CPU's for reasons of the
    # notebook, not of the "tpu"): cnn/resnet-ex-1.ipynb -- its conv biases come right before a BatchNorm, so their
    # gradient is 0 up to rounding (conv_1.bias.grad ~1e-6 against 0.08 for the weight, of either sign on either side),
    # and Adam turns that noise into full lr steps of its sign: conv_1.bias parts by 0.02 after the first step, the
    # eval-mode running means with it (first epoch's training accuracy 36.72% on the CPU, 30.78% on the "tpu", while the
    # training costs agree to 5e-4); cnn/cnn-resnet18-mnist.ipynb -- its first-step gradients already part by 0.1-0.7%
    # (first cost 2.5470 / 2.5471, then epoch 1 16.09% / 15.16%): given the same input (the "tpu"'s own activations) a
    # residual block's gradients on the "tpu" are within 4e-7 of float64's while the CPU's float32 is 1e-3 off, i.e.
    # ReLU/max-pool decisions on values at rounding level; Adam then spreads them over its 11M weights;
    # tricks/gradclipping_mlp.ipynb -- 5-layer MLP, Adam (lr 0.01) and clip_grad_value_(..., 1.): replayed outside the
    # notebook, the gradients agree to 1.5e-6 for 13 steps (the clipping itself too), then jump to 6e-4 in one step (a
    # ReLU unit at its boundary) and the notebook's costs part from epoch 4 (1.0390 / 1.0395); the same replay without
    # the clipping stays within 4e-5; gan/gan.ipynb -- fails on both sides (ax.plot of its list of loss tensors that
    # require grad: "Can't call numpy() on Tensor that requires grad", today's matplotlib), and its Dropout draws from
    # the "tpu"'s own generator; the CIFAR-10 notebooks (torchvision checks the archive's md5: no synthetic stand-in)
    # and those with Dropout (mlp-dropout, densenet121, the GANs) are not tried
    # held-out 5 (benchmarks/migrate_corpus_heldout5.txt), since held-out 20's reading: PyTorch-GAN's MNIST GANs, whose
    # `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor` ... `imgs.type(Tensor)` / `Tensor(n, 1)` the
    # tool kept on CUDA until 2026-12-06 (they ran on the CPU of a TPU host): now `_tpu_tensor_type` / `_tpu_as_type`
    # with `cuda = torch.accelerator.is_available()` and `.cuda()` -> `.to("tpu")`. Those without Dropout (its masks
    # come from the "tpu"'s own generator, as on CUDA): see _pytorch_gan
    *(
        _pytorch_gan(name, what)
        for name, what in (
            ("gan", "MLP generator and discriminator, BCE"),
            ("wgan", "weight-clipped critic, RMSprop, the generator every 5th batch"),
            ("wgan_gp", "gradient penalty through autograd.grad(create_graph=True)"),
        )
    ),
    # Not here from PyTorch-GAN (tried 2026-12-06, all without Dropout): began.py and bgan.py fail on both sides
    # (`.data[0]` of a 0-dim loss; an undefined `mnist_loader`); softmax_gan.py raises on both sides since
    # 2026-12-06 -- its generator's backward runs through the discriminator's graph after optimizer_D.step() changed
    # its weights in place, which the CPU refuses ("modified by an inplace operation") and the "tpu" ran silently
    # until its foreach ops bumped version counters (tests/backend/test_foreach_versions.py); ebgan.py applies its
    # normal_ weight init after .cuda(), so its weights come from the device's own generator (as on CUDA): the
    # first losses already differ (D 1.441493 on the CPU, 1.359365 on the "tpu")
    # held-out 25 (benchmarks/migrate_corpus_heldout25.txt): pykan's API tutorials (see _pykan)
    _pykan(
        "tutorials/API_demo/API_3_extract_activations.ipynb",
        "a [2,5,1] KAN's activations on 100 normal samples, get_range of one",
        rtol=0.0,
        atol=0.0101,  # the notebook prints 2 decimals
    ),
    _pykan(
        "tutorials/API_demo/API_1_indexing.ipynb",
        "fix_symbolic's sin fit of 5 activations of a [2,3,2,1] KAN, each r2",
        rtol=1e-5,
        atol=0.0,
    ),
    # Not here from held-out 25 (tried 2026-12-07 unless said): pykan's hellokan.ipynb and its tutorials with
    # model.fit -- the CPU reference of hellokan runs in 320 s, the migrated one ran past the 900 s timeout in its
    # first fit (50 LBFGS steps; the CPU's took 214 s): outside the notebook, the [2,5,1] KAN's forward + backward on
    # its 1,000 float64 samples takes 0.54 s on the CPU and 16.4 s (first call) / 21.4 s (second, same shapes) on the
    # "tpu", 2 LBFGS steps 26.7 s / 91.7 s, with the same printed losses; recurrent-memory-transformer-pytorch's
    # train.py -- its CPU reference had not printed the first training loss after 7 minutes, at 18.5 GB resident, so
    # the "tpu" side was not started (a synthetic 95 MB enwik8.gz stood in for the committed one, which the mirror
    # lacks); MEGABYTE-pytorch's train.py (4 x 4
    # sequences of 8,192 bytes a step, a larger model) -- not tried, for the same reason; grokking's grokking/cli.py
    # (W&B offline, --num_steps 2, as its README runs it) runs to the end on the "tpu" (its log: "Device: tpu",
    # "train_inputs.device: tpu:0") in 42.6 s (the CPU's: 18.9 s), but it prints no number (wandb 0.31 offline writes
    # no summary when its output is not a terminal) and its batches come from torch.randperm(..., device=device), the
    # "tpu"'s own generator: not comparable; torchsde's examples -- their Brownian motion draws
    # torch.randn(..., generator=torch.Generator(device)) on the device, the "tpu"'s own generator: not comparable,
    # not tried; torchcde's examples and karpathy/pytorch-normalizing-flows -- they name no device (nothing to migrate,
    # nothing would run on the "tpu"); cloneofsimo/minRF -- torchvision datasets (torchvision absent)
    # held-out 27 (benchmarks/migrate_corpus_heldout27.txt): PaLM-rlhf-pytorch's train.py, sentence-transformers's
    # examples (see _st) and ReAgent's reagent/ope/test/gridworld.py
    Script(
        "PaLM-rlhf-pytorch train.py (PaLM 8x512 on enwik8 with Lion through accelerate: its first training step and "
        "first validation loss, then ended at the sampling; synthetic enwik8.gz)",
        "lucidrains/PaLM-rlhf-pytorch",
        ".",
        ("train.py",),
        r"(?:training|validation) loss: ([\d.]+)",
        timeout=1200,
        # accelerate picks its device itself: with no CUDA it takes the privateuse1 backend that is registered (the
        # "tpu", on the unmigrated copy too), so the CPU reference asks for the CPU (Accelerator(cpu=True))
        cpu_patch=(
            (
                "train.py",
                "Accelerator(gradient_accumulation_steps=GRADIENT_ACCUMULATE_EVERY)=>"
                "Accelerator(gradient_accumulation_steps=GRADIENT_ACCUMULATE_EVERY, cpu=True)",
            ),
        ),
        rtol=1e-4,
        atol=1e-6,
        manifest="migrate_corpus_heldout27.txt",
        setup=ENWIK8_GZ,
        # the first sampling (512 tokens, one forward each) would follow: the compared numbers are all printed
        stop_at=r"validation loss: [\d.]+\n",
        needs=(
            "accelerate",
            "lion_pytorch",
            "adam_atan2_pytorch",
            "hl_gauss_pytorch",
            "memmap_replay_buffer",
            "x_mlps_pytorch",
            "einx",
            "beartype",
        ),
    ),
    _st(
        "examples/sentence_transformer/applications/semantic-search/semantic_search.py",
        "encode_document / encode_query, cosine similarity, torch.topk",
        "sentence-transformers/all-MiniLM-L6-v2",
        "bi",
        r"\(Score: ([\d.]+)\)",
        rtol=0.0,
        atol=1.01e-4,  # the script prints 4 decimals
    ),
    _st(
        "examples/sentence_transformer/applications/computing-embeddings/computing_embeddings.py",
        "model.encode of 3 sentences, the embeddings printed by NumPy",
        "sentence-transformers/all-MiniLM-L6-v2",
        "bi",
        FLOATS,
        rtol=1e-4,
        atol=1e-6,
    ),
    _st(
        "examples/cross_encoder/applications/cross-encoder_usage.py",
        "CrossEncoder.rank and .predict of 9 sentence pairs",
        "cross-encoder/stsb-distilroberta-base",
        "cross",
        FLOATS,
        rtol=1e-4,
        atol=1.01e-2,  # rank's scores print 2 decimals, predict's array 8 digits
    ),
    _st(
        "examples/sentence_transformer/training/quora_duplicate_questions/application_duplicate_questions_mining.py",
        "util.paraphrase_mining of 20 questions, the top 20 pairs' cosine similarities",
        "sentence-transformers/all-MiniLM-L6-v2",
        "bi",
        r"(?m)^(-?\d+\.\d{3})\t",
        rtol=0.0,
        atol=1.01e-3,  # the script prints 3 decimals
    ),
    _st(
        "examples/sentence_transformer/applications/semantic-search/semantic_search_quora_pytorch.py",
        "encodes a Quora corpus, pickles its embeddings, then util.semantic_search for 3 typed questions",
        "sentence-transformers/quora-distilbert-multilingual",
        "distil",
        r"(?m)Corpus loaded with (\d+) |^\t(-?\d+\.\d{3})\t",
        # (its corpus embeddings, a "tpu" tensor, are pickled to quora-embeddings-*.pkl on the way: that works)
        data=QUORA_TSV,
        # the user's questions at its prompt; its loop then meets the end of the input (EOFError): ended after the
        # third answer
        stdin="How can I learn Python fast?\nWhat is the best way to lose weight?\nWhere should I stay in Goa?\n",
        stop_at=r"(?:\n========\n[\s\S]*?){3}",
        rtol=0.0,
        atol=1.01e-3,  # the script prints 3 decimals
    ),
    Script(
        "ReAgent reagent/ope/test/gridworld.py (off-policy evaluation on a random 10x10 grid world: 5,000 logged "
        "episodes, then NeuralDualDICE's zeta and value networks on the device; its first training step's losses, "
        "then ended; device = 'cuda' if cuda.is_available())",
        "facebookresearch/ReAgent",
        ".",
        ("reagent/ope/test/gridworld.py",),
        r"Samples \d+, Avg Zeta Loss (-?[\d.]+(?:e-?\d+)?), Avg Value Loss (-?[\d.]+(?:e-?\d+)?),",
        timeout=1200,
        rtol=1e-4,
        atol=1e-6,
        manifest="migrate_corpus_heldout27.txt",
        # the next report is 1,000 steps later (of 100,000): the CPU had not reached it after a minute
        stop_at=r"Samples 0, Avg Zeta Loss \S+, Avg Value Loss \S+,\n",
        # the repository's reagent package importable, as `pip install -e .` makes it; its reagent.evaluation.cpe
        # imports torch.utils.tensorboard (tensorboard, absl-py)
        env=(("PYTHONPATH", "{root}"),),
        needs=("sklearn", "tensorboard", "absl"),
    ),
    # Not here from held-out 27 (tried 2026-12-07): sentence-transformers's sparse_encoder examples
    # (computing_embeddings/compute_embeddings.py, semantic_textual_similarity/semantic_textual_similarity.py; a
    # synthetic SPLADE, ST_HUB's "splade") -- the migrated run raises in SparseEncoder.encode
    # (sentence_transformers/sparse_encoder/SparseEncoder.py:602, `embeddings = embeddings.to_sparse()`):
    # NotImplementedError: operator 'aten::_to_sparse' is not implemented for TPU (the backend has no sparse
    # tensors); the CPU reference of semantic_textual_similarity.py runs (9 scores), compute_embeddings.py's fails on
    # both sides in its decode of the top tokens (a token of the synthetic vocabulary that decodes to None);
    # flair's examples/ner/run_ner.py (WNUT_17 and a 2x128 BERT, both synthetic; flair needs transformers<5, run with
    # transformers 4.57, huggingface_hub 0.36 and tokenizers 0.22 put first on PYTHONPATH) -- its CPU reference
    # trains 2 epochs in 45 s, the migrated run had done 9 of its first epoch's 12 batches at the 900 s timeout
    # (49-158 s a batch: each batch is padded to its own length, a new shape for the backend), and its first loss
    # already differs (2.84700264 on the CPU, 2.44740316 on the "tpu"): SequenceTagger's word and locked dropout
    # draw their masks on the device, from the "tpu"'s own generator -- not comparable; PaLM-rlhf-pytorch's
    # examples.py -- RLHFTrainer.train and generate sample up to 2,048 tokens (one forward a token) and print no
    # number but the tokens. Not tried: the repositories whose code imports torchvision (doctr, CRAFT-pytorch,
    # EfficientSAM, EasyOCR, GFPGAN, LAVIS, InternVL, instruct-pix2pix, Kolors): the only torchvision wheels at hand
    # (0.28-0.29) are CUDA builds whose _C.so needs libtorch_cuda.so, and `import torchvision` fails with this
    # CPU-only torch ("operator torchvision::nms does not exist"); EfficientSAM's scripts name no device (nothing to
    # migrate); the rest need pretrained models that a hub serves (GPT-SoVITS, so-vits-svc), DeepSpeed
    # (Megatron-DeepSpeed: its megatron/ and its mpu tests import deepspeed.accelerator) or many native dependencies
    # and a whole pipeline (alphafold3-pytorch: rdkit, gemmi, biopython, a Nim extension, and its README's example is
    # inline code, not a file; nnUNet: batchgenerators, acvl_utils, dynamic_network_architectures, SimpleITK, and a
    # dataset to plan and preprocess first); ReAgent's code outside reagent/ope needs gym, pytorch_lightning and
    # torchrec. ReAgent's reagent/ope/test/gridworld.py runs 100,000 NeuralDualDICE steps before its other
    # estimators print (only the first report is compared, see its entry); cartpole.py was not tried.
    # sentence-transformers's examples not tried: those that download a dataset with load_dataset (no synthetic
    # datasets cache here), those that need nltk's punkt data (text-summarization, in_document_search_crossencoder),
    # faiss/usearch/annoy/hnswlib or a search server, and kmeans.py / agglomerative.py (they print clusters of
    # sentences, no number)
]


@dataclass
class Result:
    name: str
    cmd: str
    rc: dict[str, object] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    values: dict[str, list[float]] = field(default_factory=dict)
    devices: str = ""
    match: bool = False
    why: str = ""


def _commit(repo: str, manifest: str = MANIFEST.name) -> str:
    for line in (HERE / manifest).read_text().splitlines():
        parts = line.split("#", 1)[0].split()
        if len(parts) == 2 and parts[0] == repo:
            return parts[1]
    raise SystemExit(f"{repo} is not in {manifest}")


def _extract(mirror: Path, repo: str, folder: str, dest: Path, manifest: str = MANIFEST.name) -> None:
    """Write the files under ``folder`` at the manifest's commit (blobs absent from the mirror are skipped)."""
    repo_dir = mirror / repo.replace("/", "+") / "repo"
    if (repo_dir / ".git").is_dir():  # (a mirror the fetch tool left as a checkout)
        repo_dir = repo_dir / ".git"
    git_dir = f"--git-dir={repo_dir}"
    args = ["git", git_dir, "ls-tree", "-r", "-z", _commit(repo, manifest)]
    if folder != ".":
        args += ["--", folder]
    listing = subprocess.run(args, capture_output=True, check=True).stdout.decode().split("\0")
    for entry in filter(None, listing):
        meta, path = entry.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind != "blob" or mode == "120000":
            continue
        blob = subprocess.run(["git", git_dir, "cat-file", "blob", sha], capture_output=True)
        if blob.returncode == 0:
            out = dest / path
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(blob.stdout)


def _patch(tree: Path, patches: tuple[tuple[str, str], ...]) -> None:
    for rel, spec in patches:
        old, new = spec.split("=>", 1)
        path = tree / rel
        data = path.read_bytes()  # bytes: keep the file's line endings
        if old.encode() not in data:
            raise SystemExit(f"cpu_patch: {old!r} not in {path}")
        path.write_bytes(data.replace(old.encode(), new.encode()))


def _run(
    cmd: list[str],
    cwd: Path,
    timeout: int,
    hook: Path,
    stop_at: str = "",
    devices_file: Path | None = None,
    extra_env: dict[str, str] | None = None,
    stdin: Path | None = None,
) -> tuple[object, str, float]:
    """Run ``cmd`` (``nice``) with the hook's sitecustomize first on PYTHONPATH; ``stdin``: a file fed on its
    standard input (else it inherits the runner's)."""
    extra = dict(extra_env or {})
    env = {
        **os.environ,
        **extra,
        **({"TPU_RUN_DEVICES_FILE": str(devices_file)} if devices_file else {}),
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(hook), extra.get("PYTHONPATH"), os.environ.get("PYTHONPATH")])
        ),
        # the same string hashes on both sides: a script that numbers its classes in the order of a set of
        # strings (pygcn's encode_onehot) would otherwise get another numbering, so other losses, on every run
        "PYTHONHASHSEED": "0",
    }
    t0 = time.perf_counter()
    stdin_file = open(stdin, "rb") if stdin else None  # noqa: SIM115 (closed below)
    try:
        if stop_at:
            return _run_until(["nice", "-n", "10", *cmd], cwd, env, timeout, stop_at, t0, stdin_file)
        out = subprocess.run(
            ["nice", "-n", "10", *cmd],
            cwd=cwd,
            env=env,
            stdin=stdin_file,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        rc: object = out.returncode
        text = out.stdout + out.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        text = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
    finally:
        if stdin_file:
            stdin_file.close()
    return rc, text, time.perf_counter() - t0


def _run_until(
    cmd: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: int,
    stop_at: str,
    t0: float,
    stdin: object = None,
) -> tuple[object, str, float]:
    """Run ``cmd`` with its output in files, polled once a second: once it shows ``stop_at`` the run is ended and
    counts as exit 0. It is interrupted (SIGINT), so that its atexit hooks, the device report among them, still run;
    if it has not ended a minute later, its process group (the run's own processes, in a session of their own) is
    killed."""
    out_path, err_path = cwd / ".corpus-run.out", cwd / ".corpus-run.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=stdin,
            stdout=out,
            stderr=err,
            start_new_session=True,
            # a run started in the background (`cmd &`) would inherit SIGINT ignored, and Python keeps it so
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        rc: object = None

        def text() -> str:
            return out_path.read_text(errors="replace") + err_path.read_text(errors="replace")

        while rc is None:
            time.sleep(1)
            ended = proc.poll() is not None
            # stop_at first: what the run does after it (an exit included) does not count
            if re.search(stop_at, text()):
                rc = 0
            elif ended:
                rc = proc.returncode
            elif time.perf_counter() - t0 > timeout:
                rc = "timeout"
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # while its leader lives, the group id is still the run's
                proc.wait()
    return rc, text(), time.perf_counter() - t0


def _values(rx: str, text: str) -> list[float]:
    return [float(g) for m in re.finditer(rx, text) for g in m.groups() if g is not None]


def run_script(s: Script, mirror: Path, scratch: Path) -> Result:
    res = Result(s.name, " ".join(s.argv))
    missing = [m for m in s.needs if importlib.util.find_spec(m) is None]
    if missing:
        res.why = f"skipped: the script needs {', '.join(missing)} (pip install them to run it)"
        return res
    base = scratch / re.sub(r"[^A-Za-z0-9_.-]+", "_", s.name)[:120]
    for side in ("cpu", "tpu"):
        tree = base / side
        if not tree.exists():
            _extract(mirror, s.repo, s.folder, tree, s.manifest)
            if s.setup:
                subprocess.run([sys.executable, "-c", s.setup], cwd=tree / s.folder, check=True)
            if side == "cpu":
                _patch(tree / s.folder, s.cpu_patch)
            else:
                mig = subprocess.run(
                    [sys.executable, "-m", "tpu_workbench.migrate.cli", "--write", "-q", "."],
                    cwd=tree / s.folder,
                    capture_output=True,
                    text=True,
                )
                if mig.returncode not in (0, 1, 3):
                    res.why = f"migration failed: {mig.stderr[-500:]}"
                    return res
        hook = base / "hook"
        hook.mkdir(exist_ok=True)
        (hook / "sitecustomize.py").write_text(HOOK + s.compat)
        cmd, cwd = [sys.executable, *s.argv], tree / s.folder
        if len(s.argv) == 1 and s.argv[0].endswith(".ipynb"):
            (hook / "watermark.py").write_text(WATERMARK)
            (base / "nbrun.py").write_text(NB_DRIVER)
            # run in the notebook's own folder (a notebook below ``folder``, e.g. a repository's tutorials/)
            cwd = (cwd / s.argv[0]).parent
            cmd = [sys.executable, str(base / "nbrun.py"), Path(s.argv[0]).name, str(s.timeout)]
        devices_file = base / f"{side}.devices"
        devices_file.unlink(missing_ok=True)  # (a previous run's)
        extra_env = {k: v.replace("{root}", str(tree)) for k, v in s.env}
        stdin = None
        if s.stdin:
            stdin = base / "stdin.txt"
            stdin.write_text(s.stdin)
        rc, text, secs = _run(cmd, cwd, s.timeout, hook, s.stop_at, devices_file, extra_env, stdin)
        (base / f"{side}.log").write_text(text)
        res.rc[side], res.seconds[side] = rc, round(secs, 1)
        res.values[side] = _values(s.numbers, text)
        if side == "tpu":
            seen = {d for m in re.finditer(r"@@devices (\S*)", text) for d in m.group(1).split(",") if d}
            if devices_file.exists():  # what the hook saw in every process, a notebook's kernel among them
                seen |= {d for line in devices_file.read_text().split() for d in line.split(",") if d}
            res.devices = ",".join(sorted(seen))
    cpu, tpu = res.values["cpu"], res.values["tpu"]
    if res.rc != {"cpu": 0, "tpu": 0}:
        res.why = f"exit status {res.rc}"
    elif not cpu or len(cpu) != len(tpu):
        res.why = f"{len(cpu)} numbers on cpu, {len(tpu)} on tpu"
    elif "tpu" not in res.devices.split(","):
        res.why = "the migrated run put nothing on the tpu"
    else:
        bad = [
            (a, b)
            for a, b in zip(cpu, tpu, strict=True)
            if not math.isclose(a, b, rel_tol=s.rtol, abs_tol=s.atol)
        ]
        res.match = not bad
        res.why = "" if not bad else f"{len(bad)} of {len(cpu)} numbers differ, first {bad[0]}"
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--mirror", type=Path, default=Path("/work/.mirror"), help="bare git mirrors (owner+name/repo)"
    )
    p.add_argument("--scratch", type=Path, default=Path("/tmp/corpus-run"), help="where the copies are run")
    p.add_argument(
        "--only",
        action="extend",
        nargs="+",
        default=[],
        help="run scripts whose name contains one of these",
    )
    a = p.parse_args(argv)
    ok = 0
    chosen = [s for s in SCRIPTS if not a.only or any(o in s.name for o in a.only)]
    for s in chosen:
        r = run_script(s, a.mirror, a.scratch)
        ok += r.match
        print(json.dumps(r.__dict__), flush=True)
    print(
        f"{ok}/{len(chosen)} scripts ran on tpu after migration with numbers matching the CPU",
        file=sys.stderr,
    )
    return 0 if ok == len(chosen) else 1


if __name__ == "__main__":
    raise SystemExit(main())
