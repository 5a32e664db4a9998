"""Command line: ``deltadv <command>`` (or ``python -m deltadv <command>``).

``deltadv --version`` prints the version. Commands:
  read-dv ROOT JSON     print the row indexes of a ``deletionVector`` descriptor
  z85-decode TEXT SIZE  print the hex bytes of Delta-style Z85
  demo                  run the demo
"""

from __future__ import annotations

import argparse
import json
import sys

import deltadv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deltadv", description="Delta Lake deletion vectors")
    parser.add_argument("--version", action="version", version=f"deltadv {deltadv.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    read = sub.add_parser("read-dv", help="print the rows a DV descriptor marks deleted")
    read.add_argument("table_root")
    read.add_argument("descriptor", help="the deletionVector JSON object from the log")
    z85 = sub.add_parser("z85-decode", help="decode Delta-style Z85 to hex")
    z85.add_argument("text")
    z85.add_argument("size", type=int)
    sub.add_parser("demo", help="run the demo")
    args = parser.parse_args(argv)

    try:
        if args.command == "read-dv":
            dv = deltadv.DeletionVectorDescriptor.from_json(args.descriptor).read(args.table_root)
            json.dump(dv.to_numpy().tolist(), sys.stdout)
            print()
        elif args.command == "z85-decode":
            print(deltadv.z85_decode(args.text, args.size).hex())
        else:
            from deltadv.demo import main as demo

            return demo([])
    except (deltadv.DeltaDVError, ValueError, OSError) as err:
        print(f"deltadv: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
