"""The IR file the interpreter and loading benchmarks read (bench/run.py, bench/loading.py):
a chain of Converts, written without importing any framework."""


def convert_chain_xml(path: str, layers: int, dims=(1,)) -> None:
    """A Parameter followed by `layers` Converts (f32 <-> f16 alternating) and a Result."""
    dim_xml = "".join(f"<dim>{d}</dim>" for d in dims)
    shape = ",".join(map(str, dims))
    out = [f'<?xml version="1.0"?>\n<net name="chain" version="11">\n<layers>\n'
           f'<layer id="0" name="x" type="Parameter" version="opset1">'
           f'<data shape="{shape}" element_type="f32"/><output><port id="0" precision="FP32" '
           f'names="x">{dim_xml}</port></output></layer>\n']
    types = ["f16", "f32"]
    prev = "FP32"
    for i in range(1, layers + 1):
        t = types[(i - 1) % 2] if i < layers else "f32"
        prec = "FP16" if t == "f16" else "FP32"
        out.append(f'<layer id="{i}" name="c{i}" type="Convert" version="opset1">'
                   f'<data destination_type="{t}"/><input><port id="0" precision="{prev}">'
                   f'{dim_xml}</port></input><output><port id="1" precision="{prec}">{dim_xml}'
                   f'</port></output></layer>\n')
        prev = prec
    out.append(f'<layer id="{layers + 1}" name="y" type="Result" version="opset1">'
               f'<input><port id="0" precision="FP32">{dim_xml}</port></input></layer>\n')
    out.append("</layers>\n<edges>\n")
    for i in range(1, layers + 2):
        fp = 0 if i == 1 else 1
        out.append(f'<edge from-layer="{i - 1}" from-port="{fp}" to-layer="{i}" to-port="0"/>\n')
    out.append("</edges>\n</net>\n")
    with open(path, "w") as f:
        f.write("".join(out))
