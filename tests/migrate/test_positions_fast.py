"""The one-pass start positions agree with libcst's PositionProvider and the code with module.code."""

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from tpu_workbench.migrate._positions import start_positions

SOURCES = [
    "import torch_xla.core.xla_model as xm\n\ndef f(x):\n    return xm.xla_device()  # c\n",
    "x = (\n    1,\n    'cuda',\n)\r\nif x:\r\n    y = [a for a in x if a]\r\n",
    "@dec\nclass A:\n    '''doc'''\n\n    async def g(self, *, k=1):\n        await h(f'{k}:cuda')\n",
    "with a as b, c:\n    pass\nelse_ = lambda q: q\ntry:\n    pass\nexcept E as e:\n    raise\n",
]


def test_start_positions_match_position_provider():
    for src in SOURCES:
        module = cst.parse_module(src)
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        pos, code = start_positions(module)
        assert code == module.code == src
        for node, rng in expected.items():
            assert pos(node) == (rng.start.line, rng.start.column + 1), (src, node)
