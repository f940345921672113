// llama.cpp's tokenizer (npm node-llama-cpp: model.tokenize) on Llama-2's vocabulary
// (write_tokenizer.py's llama2_vocab.gguf, loaded vocabulary only), over the same text as
// benchmarks/bench_text.cpp: the repository's README and docs, whole and line by line. Best of
// `reps` runs; MB/s of input text, one thread. Writes JSON {"whole_mb_s", "lines_mb_s", "tokens"}
// and, with a third argument, the ids of each line of that JSON-lines file (to compare with
// ctformer's: scripts/bench_report).
// Usage: LLAMA_NODE_PATH=<node_modules> node bench_tokenize.mjs GGUF REPO_ROOT OUT.json REPS [LINES.jsonl IDS.jsonl]
import path from "node:path";
import fs from "node:fs";
import { pathToFileURL } from "node:url";

const [gguf, root, outFile, repsArg, linesIn, idsOut] = process.argv.slice(2);
const reps = Number(repsArg || 5);
const mod = await import(pathToFileURL(path.join(process.env.LLAMA_NODE_PATH, "node-llama-cpp", "dist", "index.js")));
const llama = await mod.getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath: gguf, vocabOnly: true });
const files = ["README.md", "docs/design.md", "docs/api.md", "docs/models.md", "docs/training.md", "docs/threads.md",
               "docs/embedded.md", "docs/robustness.md", "docs/weights.md", "docs/quantization.md", "docs/masks.md",
               "docs/text.md"];
const text = files.map((f) => { try { return fs.readFileSync(path.join(root, f), "utf-8"); } catch { return ""; } }).join("");
const lines = text.split("\n").filter((l) => l.length);
const bytes = Buffer.byteLength(text, "utf-8"), lineBytes = lines.reduce((a, l) => a + Buffer.byteLength(l, "utf-8"), 0);
const now = () => Number(process.hrtime.bigint()) / 1e9;
let whole = Infinity, byLine = Infinity, tokens = 0;
for (let r = 0; r < reps + 1; ++r) {
    let t0 = now();
    tokens = model.tokenize(text, false).length;
    if (r) whole = Math.min(whole, now() - t0);
    t0 = now();
    for (const l of lines) model.tokenize(l, false);
    if (r) byLine = Math.min(byLine, now() - t0);
}
fs.writeFileSync(outFile, JSON.stringify({ whole_mb_s: bytes / whole / 1e6, lines_mb_s: lineBytes / byLine / 1e6, tokens, bytes }));
if (linesIn) {
    const out = fs.readFileSync(linesIn, "utf-8").split("\n").filter((l) => l.length)
        .map((l) => JSON.stringify(Array.from(model.tokenize(JSON.parse(l), false))));
    fs.writeFileSync(idsOut, out.join("\n") + "\n");
}
