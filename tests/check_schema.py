#!/usr/bin/env python3
"""Validates JSON documents against one of precfuzz's JSON Schemas (docs/schemas/).

usage: check_schema.py SCHEMA_DIR SCHEMA [--invalid] FILE...
Exit 0 when every FILE is valid (with --invalid: when every FILE is rejected), 1 otherwise,
printing the first errors of each file that disagrees. The schemas refer to each other by
their $id; all of SCHEMA_DIR is loaded."""
import glob
import json
import os
import sys

import jsonschema


def validator(schema_dir, name):
    schemas = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(schema_dir, "*.schema.json")))]
    main = json.load(open(os.path.join(schema_dir, name)))
    cls = jsonschema.validators.validator_for(main)
    cls.check_schema(main)
    try:  # jsonschema >= 4.18
        from referencing import Registry, Resource
        reg = Registry().with_resources([(s["$id"], Resource.from_contents(s)) for s in schemas])
        return cls(main, registry=reg)
    except ImportError:
        store = {s["$id"]: s for s in schemas}
        return cls(main, resolver=jsonschema.RefResolver.from_schema(main, store=store))


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    schema_dir, name, files = args[0], args[1], args[2:]
    invalid = files[0] == "--invalid"
    if invalid:
        files = files[1:]
    v = validator(schema_dir, name)
    bad = 0
    for f in files:
        errs = list(v.iter_errors(json.load(open(f))))
        if invalid and not errs:
            print(f"{f}: valid against {name}, expected to be rejected")
            bad += 1
        elif not invalid and errs:
            bad += 1
            for e in errs[:3]:
                print(f"{f}: {e.json_path}: {e.message[:300]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
