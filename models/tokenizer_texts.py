"""What the tokenizer folders (models/tok_*) share: the training text their build.py trains on,
the oracle texts and id sequences, and the writer of oracle.npz (OpenVINO's outputs with
openvino_tokenizers loaded). The tests import ORACLE_* names without any framework."""
import os

import numpy as np

# Written for these tokenizers: English, French, German, Spanish, Chinese, Japanese, Korean,
# Russian, Greek, code, digits, punctuation, emoji. Training repeats it a few times.
CORPUS = """\
The quick brown fox jumps over the lazy dog. It was 3:45 pm on 12/07/2024, and the fox had
run 1,234 metres (about 0.77 miles) before lunch!
"Hello, world!" she said -- then, quietly: 'it's only a test...' Isn't it? Yes; it is.
Tokenizers split text into words, sub-words and bytes; models read the numbers they output.
A tokenizer's vocabulary holds 32,000 or 50,257 or 128,256 entries, depending on the model.
E-mail: someone@example.com, web: https://example.org/path?q=1&r=two#frag
Prices: $19.99, EUR 5,00, GBP 7.50, 100% off, 3.14159 x 2 = 6.28318.
    Indented line with    several   spaces, a tab\there, and trailing spaces.   

Le renard brun rapide saute par-dessus le chien paresseux. Où est la bibliothèque ?
Ça coûte vingt-cinq euros, s'il vous plaît. L'été dernier, nous sommes allés à Montréal.
Élève, théâtre, naïve, Noël, cœur, garçon, déjà vu, fiancée, crème brûlée, à bientôt !
Der schnelle braune Fuchs springt über den faulen Hund. Grüße aus München, Straße, Äpfel.
El rápido zorro marrón salta sobre el perro perezoso. ¿Dónde está la estación? ¡Vamos!
Быстрая коричневая лиса прыгает через ленивую собаку. Привет, мир!
Η γρήγορη καφέ αλεπού πηδά πάνω από το τεμπέλικο σκυλί. Καλημέρα!
敏捷的棕色狐狸跳过了懒狗。今天天气很好，我们去公园散步吧！你好，世界。
日本語のテキストも少し入れます。東京は大きな都市です。ありがとうございました。
カタカナとひらがな、そして漢字。ラーメンを食べたい。
한국어 문장도 있습니다. 안녕하세요, 세계! 감사합니다.
Emoji: 😀 😂 🤖 🎉 👍🏽 ❤️ 🇫🇷 👩‍💻 — and symbols: © ® ™ € £ ¥ § ¶ • … ← → ∑ ∞ ≠ ≤ ≥.
def tokenize(text: str) -> list[int]:
    return [vocab.get(piece, UNK) for piece in text.split()]  # 4 spaces, then code
for (i = 0; i < 10; ++i) { sum += a[i] * b[i]; } // C-style loop
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 256 1024 65536 3000000 2024-01-31 +33 1 23 45 67 89
Question? Answer! Ellipsis... Dash - en – em — quotes « guillemets » “curly” ‘single’.
ALL CAPS SHOUTING, MiXeD cAsE, camelCaseWord, snake_case_word, kebab-case-word.
New paragraph after a blank line.

Line one.
Line two.


Three newlines above.
"""

# The oracle's single texts: each is tokenized alone (a batch of one).
LONG_TEXT = (" ".join(CORPUS.split()) + " ")[:2000]
ORACLE_TEXTS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "Punctuation: !?.,;:'\"()[]{}<>/\\|@#$%^&*_-+=~`",
    "   leading spaces, runs    of   spaces, and trailing   ",
    "line one\nline two\n\n\nafter three newlines\r\nwindows\ttab",
    "Élève à l'école: ça coûte 25 €, naïve café crème brûlée. ÀÉÎÕÜ",
    "Ångström Æsir Øresund façade résumé SCHÖN Straße İstanbul",
    "敏捷的棕色狐狸跳过了懒狗。東京は大きな都市です。안녕하세요",
    "emoji 😀🤖🎉 👍🏽 ❤️ 🇫🇷 👩‍💻 and rare ones 🦩🫠𝕏",
    "",
    " ",
    "digits 0123456789 3.14159 1,234,567 2024-01-31",
    "unseen words: xylophone quizzically zephyr Qatar jukebox",
    LONG_TEXT,
]
ORACLE_BATCH = ["a", "A somewhat longer sentence, with a comma.", "", "naïve 日本 😀",
                "short one", "x " * 40]


def write_oracle(directory: str, tokenizer_xml: str, detokenizer_xml: str,
                 id_sequences: list[list[int]]) -> None:
    """oracle.npz beside the IRs: for every ORACLE_TEXTS entry i, `text_i/<output>` (the
    tokenizer's outputs for [text]); `batch/<output>` for ORACLE_BATCH; `detok_in_j` and
    `detok_out_j` (the detokenizer's strings for a [B, T] i64 id matrix)."""
    import openvino as ov
    import openvino_tokenizers  # noqa: F401  (registers the tokenizer ops)

    core = ov.Core()
    tok = core.compile_model(tokenizer_xml, "CPU")
    detok = core.compile_model(detokenizer_xml, "CPU")
    arrays = {}
    arrays["texts"] = np.array(ORACLE_TEXTS, dtype=np.str_)
    arrays["batch_texts"] = np.array(ORACLE_BATCH, dtype=np.str_)
    for i, text in enumerate(ORACLE_TEXTS):
        res = tok([text])
        for out in tok.outputs:
            arrays[f"text_{i}/{out.get_any_name()}"] = np.array(res[out])
    res = tok(ORACLE_BATCH)
    for out in tok.outputs:
        arrays[f"batch/{out.get_any_name()}"] = np.array(res[out])
    for j, ids in enumerate(id_sequences):
        matrix = np.array(ids, dtype=np.int64)
        if matrix.ndim == 1:
            matrix = matrix[None]
        res = detok(matrix)
        arrays[f"detok_in_{j}"] = matrix
        arrays[f"detok_out_{j}"] = np.array(res[detok.outputs[0]]).astype(np.str_)
    np.savez_compressed(os.path.join(directory, "oracle.npz"), **arrays)


def save_pair(directory: str, hf_tokenizer, **convert_kwargs):
    """convert_tokenizer(hf_tokenizer, with_detokenizer=True) -> openvino_tokenizer.xml and
    openvino_detokenizer.xml (and .bin) in `directory`; returns the two paths."""
    import openvino as ov
    from openvino_tokenizers import convert_tokenizer

    tok, detok = convert_tokenizer(hf_tokenizer, with_detokenizer=True, **convert_kwargs)
    paths = (os.path.join(directory, "openvino_tokenizer.xml"),
             os.path.join(directory, "openvino_detokenizer.xml"))
    ov.save_model(tok, paths[0])
    ov.save_model(detok, paths[1])
    return paths
