"""Builds a byte-level BPE tokenizer (GPT-2 / Llama-3 style) trained with `tokenizers` on
models/tokenizer_texts.CORPUS, wraps it as a transformers PreTrainedTokenizerFast and converts
it with openvino_tokenizers.convert_tokenizer(..., with_detokenizer=True):

    openvino_tokenizer.xml    string [?] -> input_ids, attention_mask  i64 [?, ?]
    openvino_detokenizer.xml  i64 [?, ?] -> string [?]

Vocabulary 600 (256 bytes + merges) plus <|endoftext|> and <|pad|>; the pre-tokenizer is
GPT-2's regex split, the decoder byte-level. Writes oracle.npz (tokenizer_texts.write_oracle).
Run in a venv with openvino, openvino-tokenizers, tokenizers, transformers:
`python models/tok_bpe/build.py`.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tokenizer_texts import CORPUS, save_pair, write_oracle  # noqa: E402


def train():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>", "<|pad|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([CORPUS] * 3, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                                   eos_token="<|endoftext|>", unk_token="<|endoftext|>",
                                   pad_token="<|pad|>")


def build():
    hf = train()
    tok_xml, detok_xml = save_pair(HERE, hf)
    hello = hf("Hello, world! naïve 日本 😀")["input_ids"]
    sequences = [
        hello,
        [[5, 100, 200, 300, 599], [1, 0, 7, 1, 1]],     # pad/eos ids inside, batch of two
        list(range(0, 601)),                            # every id once
        [70, 71],                                       # ids whose bytes are a split UTF-8 char
        [],
    ]
    # A split UTF-8 character: the first byte of an emoji alone.
    emoji = hf("😀")["input_ids"]
    sequences.append(emoji[:1])
    write_oracle(HERE, tok_xml, detok_xml, sequences)


if __name__ == "__main__":
    build()
