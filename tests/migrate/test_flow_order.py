"""Flow.uses answers in source order: libcst keeps a name's references in a set, and a finding's text that names
"the first" use (TPU201's "it is passed to ...") changed from run to run with the hash seed."""

import libcst as cst

from tpu_workbench.migrate.flow import Flow


def _source(n: int) -> str:
    calls = "".join(f"    f{i}(use_gpu)\n" for i in range(n))
    return f"import torch\n\n\ndef main():\n    use_gpu = torch.cuda.is_available()\n{calls}"


def test_uses_come_in_source_order():
    module = cst.parse_module(_source(24))
    flow = Flow(module)
    main = module.body[1]
    target = main.body.body[0].body[0].targets[0].target
    callees = [flow.parents[flow.parents[u]] for u in flow.uses(target)]
    names = [c.func.value for c in callees]
    assert names == [f"f{i}" for i in range(24)]
