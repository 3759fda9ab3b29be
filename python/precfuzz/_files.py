"""Files the package writes: whole or not at all."""

import json
import os


def write_atomic(path, data):
    """data (bytes, or str written as UTF-8) to path through a temporary file beside it."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    os.replace(tmp, path)


def write_json(path, obj):
    """obj as indented JSON, its directory made if missing."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, json.dumps(obj, indent=1) + "\n")
