#!/usr/bin/env python3
"""Generates bulletin/_proto/bulletin_pb2*.py(i) from protocol/src/main/proto/bulletin.proto.

Usage: python tools/gen_proto.py [--proto PATH] [--verbose]

Quiet unless something fails (`make build` runs it every time); --verbose names what it wrote.
"""

import argparse
import importlib.util
import sys
from pathlib import Path

GENERATOR = Path(__file__).resolve().parents[1] / "bulletin" / "_proto" / "_generate.py"


def main() -> int:
    # Loaded by path: importing the package would run bulletin/_proto/__init__.py first.
    spec = importlib.util.spec_from_file_location("_bulletin_proto_generate", GENERATOR)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proto", type=Path, default=gen.find_proto(),
                        help="the .proto file (default: the repository's protocol/ module)")
    parser.add_argument("-v", "--verbose", action="store_true", help="name the files written")
    args = parser.parse_args()
    if args.proto is None or not args.proto.is_file():
        parser.error(f"proto file not found: {args.proto}")
    for path in gen.generate(args.proto):
        if args.verbose:
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
