"""Builds a SentencePiece Unigram tokenizer (T5 style: nmt_nfkc normalization kept as the
model's precompiled charsmap, </s> after each text, no byte fallback) trained with
`sentencepiece` on models/tokenizer_texts.CORPUS, loads its spiece.model as a transformers
T5TokenizerFast and converts it with openvino_tokenizers.convert_tokenizer(...,
with_detokenizer=True):

    openvino_tokenizer.xml    string [?] -> input_ids, attention_mask  i64 [?, ?]
    openvino_detokenizer.xml  i64 [?, ?] -> string [?]

Vocabulary 500: <pad> </s> <unk>, then the trained pieces with their log-probabilities. Ops
beyond the other folders': CharsMapNormalization with the model's charsmap (240 KB of the
.bin) and UnigramTokenizer. Writes oracle.npz (tokenizer_texts.write_oracle). Run in a venv
with openvino, openvino-tokenizers, sentencepiece, protobuf, tokenizers, transformers:
`python models/tok_unigram/build.py`.
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
    from transformers import T5TokenizerFast

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS.splitlines() * 3), model_writer=model,
        model_type="unigram", vocab_size=500, byte_fallback=False, character_coverage=0.9995,
        pad_id=0, eos_id=1, unk_id=2, bos_id=-1, num_threads=1, minloglevel=2,
        shuffle_input_sentence=False)
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "spiece.model"), "wb") as f:
            f.write(model.getvalue())
        return T5TokenizerFast.from_pretrained(tmp, extra_ids=0)


def build():
    hf = train()
    tok_xml, detok_xml = save_pair(HERE, hf)
    hello = hf("Hello, world! naïve 日本 😀 xylophone")["input_ids"]
    sequences = [
        hello,
        [[300, 400, 450, 1, 0], [7, 8, 1, 0, 0]],       # ... </s>, then <pad>
        list(range(0, 500)),                            # every id once
        [2, 2, 50],                                     # <unk>s
        [],
    ]
    write_oracle(HERE, tok_xml, detok_xml, sequences)


if __name__ == "__main__":
    build()
