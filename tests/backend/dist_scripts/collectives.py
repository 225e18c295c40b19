"""Worker: every collective of the "tpu_dist" backend on "tpu" tensors (run under torchrun, 2 ranks).

Prints one line "OK <backend> rank=<r>" when every check passed; raises otherwise.
"""

from __future__ import annotations

import faulthandler
import os
import sys

import torch
import torch.distributed as dist


def tpu(x: torch.Tensor) -> torch.Tensor:
    return x.to("tpu")


def check(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    assert got.device.type == "tpu", f"{what}: result left the tpu device ({got.device})"
    torch.testing.assert_close(got.cpu(), want, msg=lambda m: f"{what}: {m}")


def main() -> None:
    faulthandler.dump_traceback_later(int(os.environ.get("TPU_DIST_TEST_TIMEOUT", "90")), exit=True)
    backend = sys.argv[1] if len(sys.argv) > 1 else "tpu_dist"
    dist.init_process_group(backend)
    r, w = dist.get_rank(), dist.get_world_size()
    assert w == 2

    x = tpu(torch.arange(4, dtype=torch.float32) + r)
    dist.all_reduce(x)
    check(x, torch.arange(4, dtype=torch.float32) * 2 + 1, "all_reduce sum")

    x = tpu(torch.tensor([float(r + 1)]))
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    check(x, torch.tensor([2.0]), "all_reduce max")

    # async handle
    x = tpu(torch.ones(3, dtype=torch.int64) * (r + 1))
    work = dist.all_reduce(x, async_op=True)
    work.wait()
    check(x, torch.full((3,), 3, dtype=torch.int64), "all_reduce async int64")

    outs = [tpu(torch.zeros(2)) for _ in range(w)]
    dist.all_gather(outs, tpu(torch.full((2,), float(r))))
    for i, o in enumerate(outs):
        check(o, torch.full((2,), float(i)), f"all_gather[{i}]")

    out = tpu(torch.zeros(2 * w))
    dist.all_gather_into_tensor(out, tpu(torch.full((2,), float(r + 10))))
    check(out, torch.tensor([10.0, 10.0, 11.0, 11.0]), "all_gather_into_tensor")

    inp = tpu(torch.arange(4, dtype=torch.float32))
    out = tpu(torch.zeros(2))
    dist.reduce_scatter_tensor(out, inp)
    check(out, torch.arange(4, dtype=torch.float32)[2 * r : 2 * r + 2] * 2, "reduce_scatter_tensor")

    ins = [tpu(torch.full((2,), float(i + r))) for i in range(w)]
    out = tpu(torch.zeros(2))
    dist.reduce_scatter(out, ins)
    check(out, torch.full((2,), float(2 * r + 1)), "reduce_scatter")

    x = tpu(torch.full((3,), float(r + 5)))
    dist.broadcast(x, src=1)
    check(x, torch.full((3,), 6.0), "broadcast")

    inp = tpu(torch.tensor([10.0 * r, 10.0 * r + 1]))
    out = tpu(torch.zeros(2))
    dist.all_to_all_single(out, inp)
    check(out, torch.tensor([0.0 + r, 10.0 + r]), "all_to_all_single")

    ins = [tpu(torch.full((1,), float(10 * r + j))) for j in range(w)]
    outs = [tpu(torch.zeros(1)) for _ in range(w)]
    dist.all_to_all(outs, ins)
    for j, o in enumerate(outs):
        check(o, torch.full((1,), float(10 * j + r)), f"all_to_all[{j}]")

    if r == 0:
        dist.send(tpu(torch.tensor([42.0, 43.0])), dst=1)
    else:
        y = tpu(torch.zeros(2))
        dist.recv(y, src=0)
        check(y, torch.tensor([42.0, 43.0]), "send/recv")

    x = tpu(torch.full((2,), float(r + 1)))
    dist.reduce(x, dst=0)
    if r == 0:
        check(x, torch.full((2,), 3.0), "reduce")

    gl = [tpu(torch.zeros(1)) for _ in range(w)] if r == 0 else None
    dist.gather(tpu(torch.full((1,), float(r + 7))), gather_list=gl, dst=0)
    if r == 0:
        for i, o in enumerate(gl):
            check(o, torch.full((1,), float(i + 7)), f"gather[{i}]")

    out = tpu(torch.zeros(2))
    sl = [tpu(torch.full((2,), float(10 + i))) for i in range(w)] if r == 1 else None
    dist.scatter(out, scatter_list=sl, src=1)
    check(out, torch.full((2,), float(10 + r)), "scatter")

    # in-place into a view: the collective must write through to the base
    base = tpu(torch.zeros(2, 3))
    view = base[1]
    view.fill_(float(r + 1))
    dist.all_reduce(view)
    check(base, torch.tensor([[0.0, 0.0, 0.0], [3.0, 3.0, 3.0]]), "all_reduce into a view")

    # object collectives and barrier
    objs = [None, None]
    dist.all_gather_object(objs, {"rank": r})
    assert objs == [{"rank": 0}, {"rank": 1}], objs
    dist.barrier()

    # functional collectives (used by DTensor)
    import torch.distributed._functional_collectives as funcol

    y = funcol.all_reduce(tpu(torch.full((2,), float(r + 1))), "sum", dist.group.WORLD)
    check(
        funcol.wait_tensor(y) if hasattr(funcol, "wait_tensor") else y,
        torch.full((2,), 3.0),
        "funcol all_reduce",
    )

    print(f"OK {backend} rank={r}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
