"""irrun's kernels, one module per spec category. Importing this package registers nothing:
the registry (irrun/ir/registry.py) imports the modules an op type needs, as the generated
index `_index.py` lists them."""
if __name__ != "irrun.ops":
    # From a source checkout `import ops` would register every kernel a second time.
    raise ImportError("import the kernels as irrun.ops (e.g. `from irrun.ops.sparse import ...`), "
                      "not as a top-level `ops` package")
