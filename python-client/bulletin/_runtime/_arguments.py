"""The executor's side of a call's arguments: unpickling them with every store object they
name, at any depth, replaced by its value (see bulletin._placeholders)."""

from __future__ import annotations

from .._data._objects import decode, open_object
from .._errors import BulletinError
from .._placeholders import resolving
from ._argument_maps import ArgumentMaps


def load_arguments(args_path: str, paths: dict[str, str], maps: ArgumentMaps):
    """``(args, kwargs, stored)``: the call's arguments, and the values that came from store
    objects, id to (value, path). ``paths`` maps the id of each object the call names to its
    file; each object is decoded once however often it appears, from a mapping kept in ``maps``
    when an earlier call mapped it."""
    values: dict[str, object] = {}
    maps.begin(paths)

    def resolve(oid: str):
        if oid not in values:
            if oid not in paths:
                raise BulletinError(f"argument object {oid} was not sent with the call")
            values[oid] = decode(maps.buffer(oid, paths[oid]))
        return values[oid]

    with resolving(resolve):
        args, kwargs = open_object(args_path)
    return args, kwargs, {oid: (value, paths[oid]) for oid, value in values.items()}
