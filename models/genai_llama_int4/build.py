"""Rebuilds models/genai_llama_int4: models/genai_llama's model and tokenizer, exported
with int4 weights (`optimum-cli export openvino --weight-format int4 --group-size 32`).
Everything is in ../genai_llama/build.py; this runs it with the argument `int4`."""
import os
import runpy
import sys

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "int4"]
    runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "genai_llama",
                                "build.py"), run_name="__main__")
