"""Which notebook names a ``%%bulletin`` cell reads, binds, deletes and may change in place.

Read from the cell's syntax, before it runs: the names it reads are sent with it (those the
notebook has), the names it binds or deletes are what comes back. A value the cell only reads
(``print(x.shape)``) does not come back; one it may change in place comes back too, since the
cell changed a copy on the cluster. "May change in place" is read from the syntax, as a reader
would: ``x.append(1)``, ``x[0] = 1``, ``x.attr = 1``, ``x += 1``, ``x(...)`` (a module's forward
pass updates its running statistics), or ``x`` passed to a call (``shuffle(x)``), except to the
builtins that only read (``print(x)``, ``len(x)``). docs/notebooks.md says the same to users.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

# Builtins that never change their arguments: passing a name to them does not send it back.
_READ_ONLY_CALLS = frozenset({
    "print", "len", "repr", "str", "int", "float", "bool", "complex", "type", "isinstance",
    "issubclass", "sum", "min", "max", "sorted", "list", "dict", "tuple", "set", "frozenset",
    "range", "enumerate", "zip", "abs", "round", "any", "all", "format", "id", "hash", "iter",
    "reversed", "hasattr", "getattr", "callable", "divmod", "pow", "hex", "oct", "bin", "ord",
    "chr", "ascii", "bytes", "bytearray", "memoryview", "vars", "dir", "display",
})


@dataclass(frozen=True)
class CellNames:
    reads: frozenset[str]  # every name the cell loads, at any depth (an over-estimate)
    binds: frozenset[str]  # names its top level binds (assignments, imports, def, class, for)
    deletes: frozenset[str]  # names its top level deletes
    may_change: frozenset[str]  # names it may change in place (see the module's docstring)
    last_expression: bool  # whether it ends with an expression, shown as Jupyter shows it


def cell_names(source: str) -> CellNames:
    """The names of a cell; raises SyntaxError as compiling it would."""
    tree = ast.parse(source)
    top = _TopLevel()
    for statement in tree.body:
        top.visit(statement)
    reads = {node.id for node in ast.walk(tree)
             if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    # "x += 1" and "del x" need x as much as a load does.
    reads |= top.deletes | {node.target.id for node in ast.walk(tree)
                            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name)}
    return CellNames(frozenset(reads), frozenset(top.binds), frozenset(top.deletes),
                     frozenset(_may_change(tree)),
                     bool(tree.body) and isinstance(tree.body[-1], ast.Expr))


class _TopLevel(ast.NodeVisitor):
    """Names bound and deleted in the cell's own scope (not inside functions, classes or
    comprehensions, whose names are their own)."""

    def __init__(self):
        self.binds: set[str] = set()
        self.deletes: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store):
            self.binds.add(node.id)
        elif isinstance(node.ctx, ast.Del):
            self.deletes.add(node.id)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.binds.add(alias.asname or alias.name.partition(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*":
                self.binds.add(alias.asname or alias.name)

    def _definition(self, node) -> None:
        self.binds.add(node.name)
        for decorator in node.decorator_list:
            self.visit(decorator)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _definition

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        # "except E as e" unbinds e when the handler ends, as Python does.
        for statement in node.body:
            self.visit(statement)

    def visit_MatchAs(self, node) -> None:
        if node.name:
            self.binds.add(node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node) -> None:
        if node.name:
            self.binds.add(node.name)

    def visit_Lambda(self, node) -> None:
        pass

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.binds.add(node.target.id)
        self.visit(node.value)


def _may_change(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(
                node.ctx, (ast.Store, ast.Del)):
            names.update(_base_names(node.value))
        elif isinstance(node, ast.AugAssign):
            names.update(_base_names(node.target))
        elif isinstance(node, ast.Call):
            names.update(_base_names(node.func))  # x(...), x.method(...), x.a.b(...)
            if not (isinstance(node.func, ast.Name) and node.func.id in _READ_ONLY_CALLS):
                for argument in [*node.args, *(k.value for k in node.keywords)]:
                    names.update(_base_names(argument))
    return names


# numpy's methods that write into their array: an array that came read-only (mapped from the
# store) must be a copy of its own before the cell runs them.
_IN_PLACE_ARRAY_METHODS = frozenset({"sort", "fill", "put", "partition", "resize", "itemset",
                                     "setfield", "setflags", "byteswap"})


def writes_into(source: str) -> set[str]:
    """Names a cell writes into, by its syntax: ``x[0] = 1``, ``x.a = 1``, ``x += 1``,
    ``del x[0]`` and numpy's in-place methods (``x.sort()``). The narrow part of
    :func:`cell_names`' ``may_change``: an array passed to a function that writes into it is
    not seen (docs/notebooks.md says so)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(
                node.ctx, (ast.Store, ast.Del)):
            names.update(_base_names(node.value))
        elif isinstance(node, ast.AugAssign):
            names.update(_base_names(node.target))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in _IN_PLACE_ARRAY_METHODS):
            names.update(_base_names(node.func.value))
    return names


def _base_names(node: ast.AST) -> set[str]:
    """The name an expression changes through: ``x`` for ``x``, ``x.a[0]``, ``*x``."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return {node.id} if isinstance(node, ast.Name) else set()
