"""The executor's side of a call's arguments: unpickling them with every store object they
name, at any depth, replaced by its value (see bulletin._placeholders)."""

from __future__ import annotations

from .._data._objects import open_object
from .._errors import BulletinError
from .._placeholders import resolving


def load_arguments(args_path: str, paths: dict[str, str]):
    """``(args, kwargs, stored)``: the call's arguments, and the values that came from store
    objects, id to (value, path). ``paths`` maps the id of each object the call names to its
    file; each object is mapped once however often it appears."""
    values: dict[str, object] = {}

    def resolve(oid: str):
        if oid not in values:
            if oid not in paths:
                raise BulletinError(f"argument object {oid} was not sent with the call")
            values[oid] = open_object(paths[oid])
        return values[oid]

    with resolving(resolve):
        args, kwargs = open_object(args_path)
    return args, kwargs, {oid: (value, paths[oid]) for oid, value in values.items()}
