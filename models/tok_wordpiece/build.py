"""Builds a WordPiece tokenizer (BERT style: lowercasing, accent stripping, Chinese characters
split, [CLS] ... [SEP] around each text, token_type_ids) trained with `tokenizers` on
models/tokenizer_texts.CORPUS, wraps it as a transformers PreTrainedTokenizerFast and converts it
with openvino_tokenizers.convert_tokenizer(..., with_detokenizer=True):

    openvino_tokenizer.xml    string [?] -> input_ids, token_type_ids, attention_mask  i64 [?, ?]
    openvino_detokenizer.xml  i64 [?, ?] -> string [?]

Vocabulary 500 with [PAD] [UNK] [CLS] [SEP] [MASK]. Writes oracle.npz
(tokenizer_texts.write_oracle). Run in a venv with openvino, openvino-tokenizers, tokenizers,
transformers: `python models/tok_wordpiece/build.py`.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tokenizer_texts import CORPUS, save_pair, write_oracle  # noqa: E402


def train():
    from tokenizers import BertWordPieceTokenizer, processors
    from transformers import PreTrainedTokenizerFast

    tok = BertWordPieceTokenizer(clean_text=True, handle_chinese_chars=True,
                                 strip_accents=True, lowercase=True)
    tok.train_from_iterator([CORPUS] * 3, vocab_size=500, min_frequency=1,
                            special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                            show_progress=False)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.BertProcessing(("[SEP]", sep), ("[CLS]", cls))
    # The backend tokenizer as it is (BertNormalizer, BertPreTokenizer, WordPiece, the
    # [CLS] $A [SEP] template): what BertTokenizerFast would build from its vocab.txt.
    return PreTrainedTokenizerFast(tokenizer_object=tok._tokenizer, unk_token="[UNK]",
                                   pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
                                   mask_token="[MASK]", model_input_names=[
                                       "input_ids", "token_type_ids", "attention_mask"])


def build():
    hf = train()
    tok_xml, detok_xml = save_pair(HERE, hf)
    hello = hf("Hello, world! naïve 日本 😀 xylophone")["input_ids"]
    sequences = [
        hello,
        [[2, 100, 200, 300, 3], [2, 7, 3, 0, 0]],       # [CLS] ... [SEP], padded with [PAD]
        list(range(0, 500)),                            # every id once
        [1, 1, 50],                                     # [UNK]s
        [],
    ]
    write_oracle(HERE, tok_xml, detok_xml, sequences)


if __name__ == "__main__":
    build()
