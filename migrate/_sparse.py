"""Which functions of a project return sparse tensors (TorchTPU 0.2.0 has none: the SparsePrivateUse1 fallback
throws), so that moving their results to the device can be flagged where it happens (pygcn's ``adj, features,
... = load_data()`` then ``adj = adj.cuda()``, ``adj`` built by ``sparse_mx_to_torch_sparse_tensor``)."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable

#: Calls that build a sparse tensor (by their last dotted part, or a method name).
SPARSE_CONSTRUCTORS = frozenset(
    {
        "sparse_coo_tensor",
        "sparse_csr_tensor",
        "sparse_csc_tensor",
        "sparse_bsr_tensor",
        "to_sparse",
        "to_sparse_csr",
    }
)
#: ``torch.sparse.FloatTensor(indices, values, shape)`` and the other legacy sparse types.
_LEGACY_PREFIX = "sparse."
#: The text a file must hold to be read (a cheap test before parsing).
WORDS = ("sparse",)

#: A function name -> the positions of its returned tuple that are sparse (() when it returns one sparse tensor).
SparseReturns = dict[str, tuple[int, ...]]


def dotted(node: ast.AST) -> str:
    """``a.b.c`` of an attribute chain ("" parts for anything else)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


#: Methods whose result keeps a sparse tensor sparse (``torch.sparse_coo_tensor(...).coalesce()``).
_KEEPS_SPARSE = frozenset({"coalesce", "detach", "clone", "float", "double", "half", "requires_grad_"})


def sparse_source(call: ast.Call) -> ast.Call:
    """The call under methods that keep sparsity: ``torch.sparse_coo_tensor(i, v).coalesce()`` -> the constructor
    (sentence-transformers' test helper returns that)."""
    while (
        isinstance(call.func, ast.Attribute)
        and call.func.attr in _KEEPS_SPARSE
        and isinstance(call.func.value, ast.Call)
    ):
        call = call.func.value
    return call


def builds_sparse(call: ast.AST, known: SparseReturns) -> bool:
    """``call`` makes a sparse tensor: a sparse constructor, or a project function known to return one whole."""
    if not isinstance(call, ast.Call):
        return False
    call = sparse_source(call)
    name = dotted(call.func)
    last = name.rsplit(".", 1)[-1]
    if last in SPARSE_CONSTRUCTORS or (_LEGACY_PREFIX in name and last.endswith("Tensor")):
        return True
    return known.get(last) == ()


def _returns(fn: ast.FunctionDef | ast.AsyncFunctionDef, known: SparseReturns) -> tuple[int, ...] | None:
    """The sparse positions of what ``fn`` returns, () for a sparse value returned whole, None for none."""
    sparse_names: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and builds_sparse(node.value, known):
            sparse_names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(fn):
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        value = node.value
        if isinstance(value, ast.Tuple):
            hits = tuple(
                i
                for i, e in enumerate(value.elts)
                if builds_sparse(e, known) or (isinstance(e, ast.Name) and e.id in sparse_names)
            )
            if hits:
                return hits
        elif builds_sparse(value, known) or (isinstance(value, ast.Name) and value.id in sparse_names):
            return ()
    return None


def sparse_returns(trees: Iterable[ast.Module]) -> SparseReturns:
    """The project's module-level functions that return sparse tensors, through other such functions (two rounds:
    a loader that calls a converter, as pygcn's ``load_data`` calls ``sparse_mx_to_torch_sparse_tensor``). Only
    names defined once in the project: a method or a name several definitions share (peft's ``get_delta_weight``,
    sparse in one tuner and dense in the others) says nothing about the call that uses it."""
    trees = list(trees)
    defined = Counter(
        n.name
        for tree in trees
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    )
    once = {
        name for name, count in defined.items() if count == 1
    }  # (a count per name: linear in the project)
    functions = [
        n
        for tree in trees
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in once
    ]
    known: SparseReturns = {}
    for _round in range(2):
        for fn in functions:
            if fn.name not in known and (positions := _returns(fn, known)) is not None:
                known[fn.name] = positions
    return known
