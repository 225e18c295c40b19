"""What a per-step engine cost would do to the InferenceX rows (11-14), under the fluid and the chunk-exact
closed forms, the per-sequence overhead re-fitted on row 12 each time: the figures docs/projection.md
('Engine cost per step') quotes. A probe: the table takes its per-step cost from engine_costs.py.

    OMP_NUM_THREADS=1 nice .venv/bin/python benchmarks/serving_step_cost_probe.py [ms ...]
"""

from __future__ import annotations

import sys

from tpu_workbench.bench.projection.serving_chunked import chunked_steady_state
from tpu_workbench.bench.projection.serving_validation import inferencex_errors

FORMS = {"fluid": None, "chunk-exact": chunked_steady_state}


def main(argv: list[str]) -> None:
    steps_ms = [float(a) for a in argv] or [0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0]
    for form, state in FORMS.items():
        for ms in steps_ms:
            errs = inferencex_errors(state, {"tpu": ms / 1e3, "gpu": ms / 1e3})
            cells = " ".join(
                f"{row[4:]}/{chip}:{'-' if e is None else f'{e:+.0f}'}"
                for (row, chip), e in errs.items()
                if row in ("row 11", "row 14")
            )
            print(f"{form:12s} step {ms:4.1f} ms  {cells}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
