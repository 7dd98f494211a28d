"""The IR as data: reading and writing model.xml/model.bin.

Owns the lxml reader (`reader`), the port graph built from its edges (`graph`), the weights
file and the memory budget (`weights`), element types (`etypes`), shapes and tensor specs
(`shapes`), the op registry with its attribute schemas (`registry`), the opset table
(`opset_table`), checks on names (`checks`) and the IR writer (`writer`). It imports only
`irrun.errors` and `irrun.config`: nothing here knows how a model runs.
"""
