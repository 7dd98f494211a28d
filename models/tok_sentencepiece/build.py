"""Builds a SentencePiece BPE tokenizer with byte_fallback=True (Llama-2 style) trained with
`sentencepiece` on models/tokenizer_texts.CORPUS, loads its tokenizer.model as a transformers
LlamaTokenizerFast (a `tokenizers` BPE with byte fallback, Metaspace pre-tokenizer, <s> before
each text) and converts it with openvino_tokenizers.convert_tokenizer(...,
with_detokenizer=True) (the fast tokenizer's path: BPETokenizer, not the SentencePiece op):

    openvino_tokenizer.xml    string [?] -> input_ids, attention_mask  i64 [?, ?]
    openvino_detokenizer.xml  i64 [?, ?] -> string [?]

Vocabulary 700: <unk> <s> </s>, the 256 <0xNN> byte pieces, then the trained pieces.
Writes oracle.npz (tokenizer_texts.write_oracle). Run in a venv with openvino,
openvino-tokenizers, sentencepiece, protobuf, tokenizers, transformers:
`python models/tok_sentencepiece/build.py`.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tokenizer_texts import CORPUS, save_pair, write_oracle  # noqa: E402


def train():
    import io
    import tempfile

    import sentencepiece as spm
    from transformers import LlamaTokenizerFast

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS.splitlines() * 3), model_writer=model,
        model_type="bpe", vocab_size=700, byte_fallback=True, character_coverage=0.9995,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, split_digits=True, num_threads=1,
        minloglevel=2, seed_sentencepiece_size=100_000, shuffle_input_sentence=False)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tokenizer.model")
        with open(path, "wb") as f:
            f.write(model.getvalue())
        return LlamaTokenizerFast.from_pretrained(tmp, legacy=False, add_bos_token=True,
                                                  add_eos_token=False)


def build():
    hf = train()
    tok_xml, detok_xml = save_pair(HERE, hf)
    hello = hf("Hello, world! naïve 日本 😀 xylophone")["input_ids"]
    sequences = [
        hello,
        [[1, 300, 400, 500, 2], [1, 7, 2, 0, 0]],       # <s> ... </s>, then <unk>
        list(range(0, 700)),                            # every id once
        [1, 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80],   # <0xF0><0x9F><0x98><0x80>: one emoji
        [3 + 0xF0, 3 + 0x9F, 300],                      # a cut UTF-8 sequence
        [],
    ]
    write_oracle(HERE, tok_xml, detok_xml, sequences)


if __name__ == "__main__":
    build()
