"""What a %%bulletin cell reads, binds, deletes and may change, read from its syntax."""

import pytest

from bulletin._cell_names import cell_names, writes_into


def test_bindings_of_every_kind_at_the_cells_top_level():
    names = cell_names(
        "import numpy as np, os.path\nfrom math import sqrt as root\nx = y = 1\na, (b, *c) = t\n"
        "for i in range(3):\n    pass\nwith open(f) as fh:\n    pass\ndef f():\n    inner = 1\n"
        "class K:\n    attr = 1\nif (w := 5):\n    pass\n")
    assert names.binds == {"np", "os", "root", "x", "y", "a", "b", "c", "i", "fh", "f", "K", "w"}
    assert "inner" not in names.binds and "attr" not in names.binds


def test_comprehension_and_except_names_are_not_the_cells():
    names = cell_names("s = [v for v in data]\ntry:\n    pass\nexcept E as err:\n    n = 1\n")
    assert names.binds == {"s", "n"}


def test_reads_include_names_used_in_functions_and_those_changed_or_deleted():
    names = cell_names("def f():\n    return g + 1\ncount += 1\ndel old\n")
    assert {"g", "count", "old"} <= names.reads and names.deletes == {"old"}


@pytest.mark.parametrize("source, changed", [
    ("items.append(1)", {"items"}),
    ("table[0] = 1", {"table"}),
    ("obj.attr = 1", {"obj"}),
    ("obj.a.b[2].c = 1", {"obj"}),
    ("total += 1", {"total"}),
    ("model(batch)", {"model", "batch"}),
    ("shuffle(deck)", {"shuffle", "deck"}),
    ("print(x, len(y))", {"print", "len"}),
    ("z = x.shape", set()),
])
def test_what_a_cell_may_change_in_place(source, changed):
    assert cell_names(source).may_change == changed


def test_the_last_expression_is_known():
    assert cell_names("x = 1\nx").last_expression
    assert not cell_names("x = 1").last_expression and not cell_names("").last_expression


def test_a_syntax_error_is_raised_as_compiling_would():
    with pytest.raises(SyntaxError):
        cell_names("x = (")


@pytest.mark.parametrize("source, written", [
    ("x[0] = 1", {"x"}), ("x.a.b = 1", {"x"}), ("x += 1", {"x"}), ("del x[0]", {"x"}),
    ("x.sort()", {"x"}), ("x.a.fill(0)", {"x"}),
    ("y = x.sum()\nprint(x)", set()), ("x = x + 1", set()), ("shuffle(x)", set()),
])
def test_writes_into_is_the_syntax_that_writes_into_a_value(source, written):
    assert writes_into(source) == written
