"""Runs an OpenVINO GenAI LLM folder (what optimum-intel exports for text generation):
tokenize, prefill, then one token a step with the stateful model's KV cache kept in a
session, detokenize, and stream the text as it comes.

The folder holds openvino_model.xml (stateful: input_ids, attention_mask, position_ids,
beam_idx -> logits, the cache in ReadValue/Assign variables), openvino_tokenizer.xml and
openvino_detokenizer.xml (openvino_tokenizers' models), config.json and
generation_config.json. What is fed follows openvino.genai's stateful pipeline
(src/cpp/src/lm_encoding.cpp, utils.cpp, sampling/sampler.cpp, text_streamer.cpp):

- prefill: the prompt's ids [1, n], attention_mask of ones, position_ids 0..n-1 (the running
  count of mask ones before each token), beam_idx [0];
- each next step: the last token [1, 1], the mask grown by one 1, position_ids [[k]] where k
  is the number of tokens already in the cache, beam_idx [0] (one sequence: no reordering);
- greedy decoding takes the first largest logit of the last position (as GenAI's sampler); a
  generated id in the stop set (eos_token_id of generation_config.json, else config.json,
  else the tokenizer's) ends generation and is kept in the ids; the text is the detokenized
  ids (the detokenizer skips special tokens), its bytes decoded as UTF-8 with U+FFFD for
  invalid sequences, as GenAI's Python binding does.

Sampling (`do_sample=True` with temperature, top_k, top_p, seed) is irrun's own: a NumPy
generator draws from the filtered softmax, so its tokens are not GenAI's for the same seed.
Chat templates are not rendered: a folder with one raises unless apply_chat_template=False.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import FeedError, ReadError, UnsupportedError

MODEL_FILE = "openvino_model.xml"
TOKENIZER_FILE = "openvino_tokenizer.xml"
DETOKENIZER_FILE = "openvino_detokenizer.xml"
DEFAULT_MAX_NEW_TOKENS = 20
# GenAI's TextStreamer prints a token's text only once 2 more tokens have come (adding a
# token can shorten the detokenized text, e.g. when a cleanup rule fires).
STREAM_DELAY = 3


@dataclass(frozen=True)
class GenerationConfig:
    """How `LLMPipeline.generate` chooses and stops; defaults come from the folder's
    generation_config.json (then config.json), as GenAI's GenerationConfig does."""

    max_new_tokens: int | None = None     # None: max_length - prompt length, else 20
    max_length: int | None = None
    stop_token_ids: frozenset = frozenset()
    ignore_eos: bool = False
    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0                        # 0: no top-k filter
    top_p: float = 1.0
    seed: int = 0

    def new_tokens(self, prompt_len: int) -> int:
        if self.max_new_tokens is not None:
            return self.max_new_tokens
        if self.max_length is not None:
            return max(0, self.max_length - prompt_len)
        return DEFAULT_MAX_NEW_TOKENS


@dataclass
class Generation:
    """What `generate` returns: the generated ids (EOS included when it ended the run), the
    prompt's ids, why it stopped ("stop": a stop token, "length": max_new_tokens, "cancelled":
    the streamer asked) and the text; `str()` gives the text."""

    ids: list[int]
    prompt_ids: list[int]
    finish_reason: str
    _pipeline: "LLMPipeline" = field(repr=False)
    _text: str | None = field(default=None, repr=False)

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self._pipeline.detokenize(self.ids)
        return self._text

    def __str__(self) -> str:
        return self.text


def _read_json(path: str) -> dict:
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError) as e:
        raise ReadError(f"cannot read '{path}': {e}", file=path) from None
    except json.JSONDecodeError as e:
        raise ReadError(f"'{path}' is not JSON: {e.msg}", file=path, line=e.lineno) from None
    if not isinstance(data, dict):
        raise ReadError(f"'{path}' holds a {type(data).__name__}, expected a JSON object",
                        file=path)
    return data


def _ids_of(value, path: str, key: str) -> list[int]:
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ReadError(f"'{path}': {key} is {value!r}, expected a token id or a list of them",
                        file=path)
    return [v for v in values if v >= 0]


def _text_of(value) -> str:
    """A detokenizer string (str with surrogate-escaped bytes, or bytes) as UTF-8 text with
    U+FFFD for invalid sequences."""
    raw = value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "replace")


class LLMPipeline:
    """An OpenVINO GenAI LLM folder run by irrun.

    >>> pipe = LLMPipeline("models/genai_llama")
    >>> pipe.generate("The river runs", max_new_tokens=20, streamer=print).text
    >>> pipe.generate([1, 309, 379], max_new_tokens=5).ids
    """

    def __init__(self, folder):
        from ..run.model import read_model

        self.folder = os.fspath(folder)
        xml = os.path.join(self.folder, MODEL_FILE)
        if not os.path.isdir(self.folder):
            raise ReadError(f"no such folder: '{self.folder}'", file=self.folder)
        if not os.path.exists(xml):
            raise ReadError(f"'{self.folder}' is not an OpenVINO GenAI LLM folder: it has no "
                            f"{MODEL_FILE} (optimum-cli export openvino --task "
                            "text-generation-with-past writes one)", file=self.folder)
        self.model = read_model(xml)
        names = {n for info in self.model.inputs for n in info.names}
        if "input_ids" not in names or "attention_mask" not in names:
            raise UnsupportedError(
                f"{MODEL_FILE} has inputs {', '.join(sorted(names))}; irrun runs models fed "
                "input_ids and attention_mask (not inputs_embeds)", file=xml)
        if not self.model.variables:
            raise UnsupportedError(
                f"{MODEL_FILE} is not stateful (no ReadValue/Assign KV cache); export it with "
                "--task text-generation-with-past, without --disable-stateful", file=xml)
        self._inputs = names
        self._session = self.model.create_session()
        self.config = self._read_config()
        self._tokenizer = self._detokenizer = None

    # ---------------------------------------------------------------- folder

    def _read_config(self) -> GenerationConfig:
        gen_path = os.path.join(self.folder, "generation_config.json")
        cfg_path = os.path.join(self.folder, "config.json")
        gen, cfg = _read_json(gen_path), _read_json(cfg_path)
        if gen.get("eos_token_id") is not None:
            stop = _ids_of(gen["eos_token_id"], gen_path, "eos_token_id")
        elif cfg.get("eos_token_id") is not None:
            stop = _ids_of(cfg["eos_token_id"], cfg_path, "eos_token_id")
        else:
            eos = self._tokenizer_info().get("eos_token_id")
            stop = [int(eos)] if eos is not None and str(eos).lstrip("-").isdigit() else []
        config = GenerationConfig(stop_token_ids=frozenset(stop))
        known = {f: gen[f] for f in ("max_new_tokens", "max_length", "do_sample", "temperature",
                                     "top_k", "top_p", "ignore_eos") if gen.get(f) is not None}
        try:
            return _checked(replace(config, **known))
        except FeedError as e:
            raise ReadError(f"'{gen_path}': {e.message}", file=gen_path) from None

    def _tokenizer_info(self) -> dict[str, str]:
        """The <rt_info> values of openvino_tokenizer.xml (eos_token_id, chat_template, ...)."""
        path = os.path.join(self.folder, TOKENIZER_FILE)
        if not os.path.exists(path):
            return {}
        from lxml import etree

        try:
            root = etree.parse(path, etree.XMLParser(huge_tree=True, resolve_entities=False))
        except (OSError, etree.XMLSyntaxError) as e:
            raise ReadError(f"cannot read '{path}': {e}", file=path) from None
        info = root.find("rt_info")
        return {} if info is None else {el.tag: el.get("value") for el in info
                                        if isinstance(el.tag, str) and el.get("value") is not None}

    def has_chat_template(self) -> bool:
        if self._tokenizer_info().get("chat_template"):
            return True
        if os.path.exists(os.path.join(self.folder, "chat_template.jinja")):
            return True
        tc = _read_json(os.path.join(self.folder, "tokenizer_config.json"))
        return bool(tc.get("chat_template"))

    def _load(self, name: str):
        from ..run.model import read_model

        path = os.path.join(self.folder, name)
        if not os.path.exists(path):
            raise ReadError(f"'{self.folder}' has no {name}: convert the tokenizer with "
                            "openvino_tokenizers (optimum-cli does it by default), or pass "
                            "token ids", file=self.folder)
        return read_model(path)

    # ---------------------------------------------------------------- tokenizer

    def tokenize(self, text: str) -> np.ndarray:
        """The prompt's ids (i64, 1-D), special tokens added as the tokenizer says."""
        if self._tokenizer is None:
            self._tokenizer = self._load(TOKENIZER_FILE)
        tok = self._tokenizer
        out = tok.infer({tok.inputs[0].name: np.array([text], dtype=object)},
                        outputs=["input_ids"])
        return np.asarray(out["input_ids"][0], dtype=np.int64)

    def detokenize(self, ids) -> str:
        """The text of `ids` (special tokens skipped by the detokenizer)."""
        if self._detokenizer is None:
            self._detokenizer = self._load(DETOKENIZER_FILE)
        det = self._detokenizer
        a = np.asarray(list(ids), dtype=np.int64).reshape(1, -1)
        etype = det.inputs[0].element_type
        if etype == "i32":
            a = a.astype(np.int32)
        return _text_of(det.infer({det.inputs[0].name: a})[0][0])

    # ---------------------------------------------------------------- generation

    def generate(self, prompt, max_new_tokens: int | None = None, streamer=None, *,
                 apply_chat_template: bool | None = None, **options) -> Generation:
        """Generate from `prompt` (a string, or token ids: a list or 1-D array of ints).

        `streamer(text)` is called with each new piece of text as tokens come (a return value
        of True stops generation after that token, as in GenAI). Other options override the
        folder's generation_config.json: stop_token_ids (or eos_token_id), ignore_eos,
        max_length, do_sample, temperature, top_k, top_p, seed.
        """
        config = self._options(max_new_tokens, options)
        if isinstance(prompt, str):
            if self.has_chat_template() and apply_chat_template is not False:
                raise UnsupportedError(
                    f"'{self.folder}' has a chat template, which irrun does not render "
                    "(GenAI wraps a string prompt in it); pass apply_chat_template=False "
                    "(--no-chat-template) to tokenize the prompt as it is, as GenAI does "
                    "with the same flag", file=self.folder)
            prompt_ids = self.tokenize(prompt)
        else:
            prompt_ids = _prompt_ids(prompt)
        stream = _TextStream(self.detokenize, streamer) if streamer is not None else None
        ids, reason = [], "length"
        steps = self.tokens(prompt_ids, config)
        try:
            for token in steps:
                ids.append(token)
                if token in config.stop_token_ids and not config.ignore_eos:
                    reason = "stop"
                if stream is not None and stream.write(token):
                    reason = "cancelled"
                    break
        finally:
            steps.close()
        if stream is not None:
            stream.end()
        return Generation(ids, prompt_ids.tolist(), reason, self)

    def tokens(self, prompt_ids, config: GenerationConfig | None = None):
        """Yield the generated ids one at a time (the loop of `generate`, without text):
        prefill with the prompt, then one step per token, until a stop token or
        max_new_tokens. The KV cache starts empty at each call."""
        config = config or self.config
        prompt_ids = _prompt_ids(prompt_ids)
        n = len(prompt_ids)
        limit = config.new_tokens(n)
        if limit <= 0:
            return
        rng = np.random.default_rng(config.seed) if config.do_sample else None
        session = self._session
        session.reset_state()
        feed = self._feed(prompt_ids, n, np.arange(n, dtype=np.int64))
        try:
            for count in range(1, limit + 1):
                logits = session.infer(feed, outputs=["logits"])["logits"]
                token = _choose(logits[0, -1], config, rng)
                yield token
                if count == limit or (token in config.stop_token_ids and not config.ignore_eos):
                    return
                n += 1
                feed = self._feed(np.array([token], np.int64), n,
                                  np.array([n - 1], np.int64))
        finally:
            session.reset_state()     # as GenAI outside chat mode: the cache is not kept

    def _feed(self, ids: np.ndarray, total: int, positions: np.ndarray) -> dict:
        feed = {"input_ids": ids[None], "attention_mask": np.ones((1, total), np.int64)}
        if "position_ids" in self._inputs:
            feed["position_ids"] = positions[None]
        if "beam_idx" in self._inputs:
            feed["beam_idx"] = np.zeros(1, np.int32)
        return feed

    def _options(self, max_new_tokens, options) -> GenerationConfig:
        options = dict(options)
        if max_new_tokens is not None:
            options["max_new_tokens"] = max_new_tokens
        if "eos_token_id" in options:
            eos = options.pop("eos_token_id")
            options["stop_token_ids"] = set(options.get("stop_token_ids", ())) | {eos}
        known = set(GenerationConfig.__dataclass_fields__)
        unknown = sorted(set(options) - known)
        if unknown:
            raise FeedError(f"unknown generation option {', '.join(unknown)}; the options: "
                            f"eos_token_id, {', '.join(sorted(known))}")
        if "stop_token_ids" in options:
            options["stop_token_ids"] = frozenset(int(t) for t in options["stop_token_ids"])
        return _checked(replace(self.config, **options))


def _checked(config: GenerationConfig) -> GenerationConfig:
    def bad(what):
        raise FeedError(f"generation option {what}")

    for name in ("max_new_tokens", "max_length"):
        v = getattr(config, name)
        if v is not None and (not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0):
            bad(f"{name}={v!r} is not a count (an integer >= 0)")
    if not isinstance(config.top_k, (int, np.integer)) or config.top_k < 0:
        bad(f"top_k={config.top_k!r} is not an integer >= 0")
    if not 0 < float(config.top_p) <= 1:
        bad(f"top_p={config.top_p!r} is not in (0, 1]")
    if config.do_sample and not float(config.temperature) > 0:
        bad(f"temperature={config.temperature!r} is not > 0 (sampling divides by it)")
    return config


def _prompt_ids(prompt) -> np.ndarray:
    a = np.asarray(prompt)
    if a.ndim == 2 and a.shape[0] == 1:
        a = a[0]
    if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iu":
        raise FeedError(f"a prompt is a string or a non-empty list of token ids; got "
                        f"{a.dtype} of shape {list(a.shape)}")
    return a.astype(np.int64)


def _choose(logits: np.ndarray, config: GenerationConfig, rng) -> int:
    if not config.do_sample:
        return int(np.argmax(logits))          # the first largest, as GenAI's greedy sampler
    scores = logits.astype(np.float64) / float(config.temperature)
    if config.top_k and config.top_k < scores.size:
        kth = np.partition(scores, -config.top_k)[-config.top_k]
        scores = np.where(scores >= kth, scores, -np.inf)
    probs = np.exp(scores - scores.max())
    probs /= probs.sum()
    if config.top_p < 1:
        order = np.argsort(-probs, kind="stable")
        cumulative = np.cumsum(probs[order])
        keep = order[:int(np.searchsorted(cumulative, config.top_p)) + 1]
        kept = np.zeros_like(probs)
        kept[keep] = probs[keep]
        probs = kept / kept.sum()
    return int(rng.choice(probs.size, p=probs))


class _TextStream:
    """Turns ids into pieces of text for a streamer callable, as GenAI's TextStreamer: the
    cache is decoded after each token; text ending in a newline is flushed; text ending in
    U+FFFD (an incomplete UTF-8 sequence) waits; otherwise text up to the token STREAM_DELAY
    - 1 places back is given. The pieces joined are the final text."""

    def __init__(self, decode, callback):
        self.decode, self.callback = decode, callback
        self.cache: list[int] = []
        self.lengths: list[int | None] = []    # decoded length at each cached token
        self.printed = 0

    def _emit(self, piece: str) -> bool:
        return bool(piece) and self.callback(piece) is True

    def write(self, token: int) -> bool:
        """Returns True when the callback asks to stop."""
        self.cache.append(token)
        text = self.decode(self.cache)
        self.lengths.append(None if text.endswith("\ufffd") else len(text))
        if text.endswith("\n") and len(text) > self.printed:
            piece = text[self.printed:]
            self.cache, self.lengths, self.printed = [], [], 0
            return self._emit(piece)
        if self.lengths[-1] is None or len(self.lengths) < STREAM_DELAY:
            return False
        until = self.lengths[-STREAM_DELAY]
        if until is None or until <= self.printed:
            return False
        piece, self.printed = text[self.printed:until], until
        return self._emit(piece)

    def end(self) -> None:
        text = self.decode(self.cache) if self.cache else ""
        if len(text) > self.printed:
            self.callback(text[self.printed:])
        self.cache, self.lengths, self.printed = [], [], 0


def generate(folder, prompt, max_new_tokens: int | None = None, streamer=None,
             **options) -> Generation:
    """Run an OpenVINO GenAI LLM folder once: `LLMPipeline(folder).generate(...)`."""
    return LLMPipeline(folder).generate(prompt, max_new_tokens, streamer, **options)
