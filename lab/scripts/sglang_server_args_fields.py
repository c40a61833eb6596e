"""Print the field names of SGLang's `ServerArgs`, read from its wheel without importing it.

    pip download sglang==0.5.23 --no-deps -d /tmp/sgl
    python lab/scripts/sglang_server_args_fields.py /tmp/sgl/sglang-0.5.23-*.whl \
        > tests/fixtures/engine_double/sglang/server_args_fields.txt

`Engine(**kwargs)` builds `ServerArgs(**kwargs)`, a msgspec Struct whose fields are those
of the namespace classes listed in `_INPUT_NAMESPACES` (`srt/server_args.py`); each class
lives in `srt/arg_groups/fields/` and declares its fields as annotated class attributes.
The engine double refuses any other keyword, as SGLang does.
"""

from __future__ import annotations

import ast
import sys
import zipfile
from pathlib import PurePosixPath

SERVER_ARGS = "sglang/srt/server_args.py"
FIELDS_DIR = "sglang/srt/arg_groups/fields/"


def namespace_names(server_args_source: str) -> list[str]:
    """The class names in `_INPUT_NAMESPACES = [...]`."""
    for node in ast.parse(server_args_source).body:
        if (
            isinstance(node, ast.Assign)
            and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["_INPUT_NAMESPACES"]
            and isinstance(node.value, ast.List)
        ):
            return [elt.id for elt in node.value.elts if isinstance(elt, ast.Name)]
    raise SystemExit(f"{SERVER_ARGS}: no _INPUT_NAMESPACES list")


def class_fields(fields_source: str) -> dict[str, list[str]]:
    """Annotated class attributes of each `msgspec.Struct` subclass in one fields module."""
    found: dict[str, list[str]] = {}
    for node in ast.parse(fields_source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        bases = [ast.unparse(base) for base in node.bases]
        if bases != ["msgspec.Struct"]:
            raise SystemExit(f"class {node.name}: bases {bases}, expected msgspec.Struct")
        found[node.name] = [
            item.target.id
            for item in node.body
            if isinstance(item, ast.AnnAssign)
            and isinstance(item.target, ast.Name)
            and not ast.unparse(item.annotation).startswith(("ClassVar", "typing.ClassVar"))
        ]
    return found


def server_args_fields(wheel: str) -> tuple[str, list[str]]:
    """(SGLang version, sorted ServerArgs field names) from a wheel file."""
    with zipfile.ZipFile(wheel) as archive:
        names = namespace_names(archive.read(SERVER_ARGS).decode())
        classes: dict[str, list[str]] = {}
        for member in archive.namelist():
            path = PurePosixPath(member)
            if member.startswith(FIELDS_DIR) and path.suffix == ".py":
                classes.update(class_fields(archive.read(member).decode()))
        version = next(
            line.split(":", 1)[1].strip()
            for member in archive.namelist()
            if member.endswith(".dist-info/METADATA")
            for line in archive.read(member).decode().splitlines()
            if line.startswith("Version:")
        )
    missing = [name for name in names if name not in classes]
    if missing:
        raise SystemExit(f"namespace classes not found under {FIELDS_DIR}: {missing}")
    fields = [field for name in names for field in classes[name]]
    if len(fields) != len(set(fields)):
        raise SystemExit("a field is declared by two namespaces")
    return version, sorted(fields)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    version, fields = server_args_fields(argv[1])
    print(f"# ServerArgs fields of SGLang {version} (lab/scripts/sglang_server_args_fields.py)")
    print("\n".join(fields))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
