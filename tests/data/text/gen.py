#!/usr/bin/env python3
"""The text fixtures (tests/data/text/expected.json): every string of a hostile corpus encoded and
decoded by the reference tokenizers, for tests/test_text.cpp to compare ctformer's with.

References: SentencePiece itself (Debian's python3-sentencepiece; run with /usr/bin/python3) for the
three models here (sp_bpe.model: nmt_nfkc, byte fallback, user-defined pieces; sp_unigram.model:
nmt_nfkc; sp_bpe_identity.model: identity normalization, whitespace kept, no byte fallback: <unk>),
trained with Debian's spm_train on the repository's docs (train() below); GPT-2's encoder (npm
gpt-3-encoder 1.1.4) and Llama-2's vocabulary (npm llama-tokenizer-js 1.2.2), run through node.

Usage: /usr/bin/python3 tests/data/text/gen.py NODE_MODULES [--train]"""
import json
import os
import random
import subprocess
import sys

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

HARD = [
    "", " ", "  ", "\t", "\n", "a", "Hello world", "Hello  world", "Hello   world", "  leading", "trailing  ",
    "  both  ", "tabs\tand\ttabs", "CRLF\r\nline\r\n", "\r\n\r\n", "multiple\n\n\nnewlines", "digits 1234567890",
    "3.14159 2,718 1e-9 0x1F", "year 2026, 12:30pm", "Ünïcödé àccénts éàüöß", "Ça va? Ñandú. Øre. Œuvre.",
    "combining e\u0301 a\u0300 o\u0308", "Кириллица и текст: привет, мир!", "Ελληνικά γράμματα", "עברית ומספרים 123",
    "العربية النص", "हिन्दी पाठ", "中文字符测试，标点。", "日本語のテキスト、カタカナ", "한국어 텍스트",
    "emoji 👍 👍🏽 👨‍👩‍👧 🏳️‍🌈 ❤️", "flags 🇫🇷🇯🇵", "non\u00a0breaking\u00a0space", "narrow\u202fnbsp",
    "ideographic\u3000space", "zero\u200bwidth\u200cjoiners\u200d", "bom\ufeffinside", "quotes “smart” ‘single’ «guillemets»",
    "I'm you're they'll we've he'd it's 'quoted' don't", "I'M YOU'RE THEY'LL", "https://example.com/a?b=c&d=e#frag",
    "user@example.org", "int main() { return 0; }", "for (i = 0; i < n; ++i) x[i] += y[i];",
    "def f(x):\n    return x ** 2\n", "    indented code", "<s> </s> <unk> <pad> [CLS] <|endoftext|>",
    "NUL\u0000inside", "DEL\u007fchar", "bell\u0007and\u001bescape", "fullwidth ＡＢＣ １２３", "ligatures ﬁ ﬂ ﬃ",
    "circled ① ② ⑩", "superscript x² y³", "roman Ⅻ ⅻ", "math ∑ ∫ √ ∞ ≠ ≤", "currency € £ ¥ ₹ $5",
    "arrows → ← ↔ ⇒", "box ─│┌┐", "repeated aaaaaaaaaaaaaaaaaaaa", "ababababababababab", "------========",
    "...!!!???", "mixedCASE camelCase snake_case kebab-case", "ctformer <|user|> ctformer", "▁already▁escaped",
    "a\u2581b", "\u2581", "tab\t at end\t", "   ", " \t \n ", "x" * 200, "word " * 40,
    "Ⓐⓑⓒ", "ｈａｌｆ－ｗｉｄｔｈ ｶﾀｶﾅ", "ſ long s", "µ micro Ω ohm K kelvin Å angstrom",
    "\U0001F600\U0001F601\U0001F602", "\U00020000 CJK ext B", "unpaired ' \" ` quotes",
]
# Invalid UTF-8 (SentencePiece only: node's references take valid text)
BYTES = [b"\xff", b"a\xffb", b"\xe2\x82", b"\xe2\x82a", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
         b"trailing\xf0\x9f", b"\x80\x80\x80", b"ok \xef\xbf\xbd replacement", b"\xf0\x9f\x98\x80\xf0\x9f"]


def corpus():
    out = list(HARD)
    rnd = random.Random(58)
    pools = ["abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJ", "0123456789", " \t\n", ".,;:!?'\"()-",
             "éèàùçœæ", "абвгдежзий", "αβγδε", "中文字测试", "ひらがな", "👍🏽👨‍👩‍👧", "\u00a0\u3000\u200b", "ＡＢ１２"]
    for _ in range(60):
        n = rnd.randint(1, 40)
        out.append("".join(rnd.choice(rnd.choice(pools)) for _ in range(n)))
    docs = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().split("\n")
    out += [l for l in docs if l.strip()][:40]
    return out


MODELS = {"sp_bpe": "sp_bpe.model", "sp_unigram": "sp_unigram.model", "sp_bpe_identity": "sp_bpe_identity.model"}


def train():
    text = os.path.join(HERE, "train.txt")
    with open(text, "w", encoding="utf-8") as f:
        for name in sorted(os.listdir(os.path.join(ROOT, "docs"))):
            if name.endswith(".md"):
                f.write(open(os.path.join(ROOT, "docs", name), encoding="utf-8").read())
    common = ["--input=" + text, "--num_threads=1", "--character_coverage=0.9995", "--seed_sentencepiece_size=100000"]
    spm.SentencePieceTrainer.train(" ".join(common + ["--model_prefix=" + os.path.join(HERE, "sp_bpe"), "--vocab_size=800",
                                                      "--model_type=bpe", "--byte_fallback=true",
                                                      "--user_defined_symbols=<|user|>,ctformer"]))
    spm.SentencePieceTrainer.train(" ".join(common + ["--model_prefix=" + os.path.join(HERE, "sp_unigram"),
                                                      "--vocab_size=800", "--model_type=unigram"]))
    spm.SentencePieceTrainer.train(" ".join(common + ["--model_prefix=" + os.path.join(HERE, "sp_bpe_identity"),
                                                      "--vocab_size=600", "--model_type=bpe",
                                                      "--normalization_rule_name=identity",
                                                      "--remove_extra_whitespaces=false", "--character_coverage=0.98"]))
    os.remove(text)
    for m in MODELS:
        os.remove(os.path.join(HERE, m + ".vocab"))


NODE = r"""
const [which, mods] = process.argv.slice(1);
const fs = require("fs");
const input = JSON.parse(fs.readFileSync(0, "utf-8"));
(async () => {
  let enc, dec;
  if (which === "gpt2") {
    const g = require(mods + "/gpt-3-encoder");
    enc = (s) => g.encode(s); dec = (ids) => g.decode(ids);
  } else {
    const { default: t } = await import(mods + "/llama-tokenizer-js/llama-tokenizer.js");
    // a tokenizer.json's added tokens are matched in the text first (Hugging Face's tokenizers),
    // then each piece between them is encoded alone (its own "▁" in front): the reference encodes
    // those pieces
    const special = [["<unk>", 0], ["<s>", 1], ["</s>", 2]];
    const one = (s) => s.length ? t.encode(s, false, true) : [];
    enc = (s) => {
      const out = []; let from = 0;
      for (let p = 0; p < s.length;) {
        const m = special.filter(([k]) => s.startsWith(k, p)).sort((a, b) => b[0].length - a[0].length)[0];
        if (!m) { ++p; continue; }
        out.push(...one(s.slice(from, p)), m[1]); p += m[0].length; from = p;
      }
      return out.concat(one(s.slice(from)));
    };
    dec = (ids) => t.decode(ids, false, true);
  }
  const out = { ids: input.texts.map(enc), decoded: [], decode_cases: [] };
  out.decoded = out.ids.map(dec);
  out.decode_cases = input.decode_ids.map(dec);
  process.stdout.write(JSON.stringify(out));
})();
"""


def node_refs(which, mods, texts, decode_ids):
    r = subprocess.run(["node", "-e", NODE, which, mods], input=json.dumps({"texts": texts, "decode_ids": decode_ids}),
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def random_ids(vocab, rnd, n=40):
    # arbitrary id sequences (byte pieces among them): what a model may generate
    return [[rnd.randrange(vocab) for _ in range(rnd.randint(1, 12))] for _ in range(n)]


def main():
    mods = sys.argv[1]
    if "--train" in sys.argv:
        train()
    texts = corpus()
    rnd = random.Random(61)
    out = {"texts": [t.encode("utf-8").hex() for t in texts], "bytes": [b.hex() for b in BYTES], "tokenizers": {}}
    for name, model in MODELS.items():
        sp = spm.SentencePieceProcessor(model_file=os.path.join(HERE, model))
        ids = [sp.encode(t) for t in texts]
        byte_ids = [sp.encode(b) for b in BYTES]
        cases = random_ids(sp.get_piece_size(), rnd)
        # byte pieces in runs, as a model emits a character's bytes one token at a time
        byte_piece = [i for i in range(sp.get_piece_size()) if sp.is_byte(i)]
        if byte_piece:
            cases += [[rnd.choice(byte_piece) for _ in range(rnd.randint(1, 6))] for _ in range(30)]
        out["tokenizers"][name] = {
            "ids": ids, "decoded": [sp.decode(i).encode("utf-8").hex() for i in ids], "bytes_ids": byte_ids,
            "decode_ids": cases, "decode_text": [sp.decode(c).encode("utf-8").hex() for c in cases]}
    for name, vocab in (("gpt2", 50256), ("llama2", 32000)):
        cases = random_ids(vocab, rnd)
        if name == "llama2":
            cases += [[rnd.randrange(3, 259) for _ in range(rnd.randint(1, 6))] for _ in range(30)]  # <0xXX> runs
        else:
            cases = [[c for c in case if c > 2] for case in cases]
        r = node_refs("gpt2" if name == "gpt2" else "llama", mods, texts, cases)
        out["tokenizers"][name] = {"ids": r["ids"], "decoded": [d.encode("utf-8", "surrogatepass").hex() for d in r["decoded"]],
                                   "decode_ids": cases,
                                   "decode_text": [d.encode("utf-8", "surrogatepass").hex() for d in r["decode_cases"]]}
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print("texts %d, bytes %d" % (len(texts), len(BYTES)))


if __name__ == "__main__":
    main()
