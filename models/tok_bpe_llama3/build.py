"""Builds a byte-level BPE tokenizer with Llama-3's pre-tokenizer (a Split on Llama-3's
regex, case-insensitive contractions, digits in runs of at most three, then ByteLevel
without its own regex) and <|begin_of_text|> before each text, trained with `tokenizers` on
models/tokenizer_texts.CORPUS, wrapped as a transformers PreTrainedTokenizerFast and
converted with openvino_tokenizers.convert_tokenizer(..., with_detokenizer=True):

    openvino_tokenizer.xml    string [?] -> input_ids, attention_mask  i64 [?, ?]
    openvino_detokenizer.xml  i64 [?, ?] -> string [?]

Vocabulary 700 (256 bytes + merges) plus <|begin_of_text|>, <|end_of_text|> and two
reserved special tokens. Writes oracle.npz (tokenizer_texts.write_oracle). Run in a venv
with openvino, openvino-tokenizers, tokenizers, transformers:
`python models/tok_bpe_llama3/build.py`.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tokenizer_texts import CORPUS, save_pair, write_oracle  # noqa: E402

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
            "<|reserved_special_token_1|>"]


def train():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([CORPUS] * 3, trainer=trainer)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
        special_tokens=[("<|begin_of_text|>", bos)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>",
                                   eos_token="<|end_of_text|>")


def build():
    hf = train()
    tok_xml, detok_xml = save_pair(HERE, hf)
    hello = hf("Hello, world! naïve 日本 😀 12345")["input_ids"]
    sequences = [
        hello,
        [[0, 100, 200, 300, 1], [0, 7, 1, 2, 3]],       # specials inside
        list(range(0, 704)),                            # every id once
        [hello[-1]] * 3 + hello[:2],                    # out of order
        [],
    ]
    write_oracle(HERE, tok_xml, detok_xml, sequences)


if __name__ == "__main__":
    build()
