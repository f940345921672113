// llama.cpp's greedy tokens on the agreement files (write_agreement.py): for each file, 8 prompts
// of 8 token ids (fixed), 64 tokens each at temperature 0, batch 1, one thread. Writes one line
// per prompt: "<file> <prompt index> : <64 ids>" (scripts/gguf_agreement hands them to
// tests/llama_cpp/agree.cpp).
// Usage: LLAMA_NODE_PATH=<node_modules> node agree.mjs DIR OUT.txt FILE...
import path from "node:path";
import fs from "node:fs";
import { pathToFileURL } from "node:url";

const [dir, outFile, ...files] = process.argv.slice(2);
const mod = await import(pathToFileURL(path.join(process.env.LLAMA_NODE_PATH, "node-llama-cpp", "dist", "index.js")));
const llama = await mod.getLlama({ gpu: false, build: "never", logLevel: "error" });
const prompts = Array.from({ length: 8 }, (_, p) => Array.from({ length: 8 }, (_, i) => 3 + ((p * 131 + i * 71 + 17) % 509)));
const lines = [];
for (const file of files) {
    const model = await llama.loadModel({ modelPath: path.join(dir, file) });
    // F32 keys and values: llama.cpp's default F16 cache would round what ctformer keeps in float
    const ctx = await model.createContext({ contextSize: 128, threads: 1, batchSize: 8, sequences: 1,
                                            experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" });
    const seq = ctx.getSequence();
    for (const [p, prompt] of prompts.entries()) {
        await seq.clearHistory();
        const got = [];
        for await (const tok of seq.evaluate(prompt, { temperature: 0 })) {
            got.push(tok);
            if (got.length === 64) break;
        }
        lines.push(`${file} ${p} : ${prompt.join(" ")} : ${got.join(" ")}`);
    }
    await ctx.dispose();
    await model.dispose();
}
fs.writeFileSync(outFile, lines.join("\n") + "\n");
console.error(`llama.cpp: ${files.length} files x ${prompts.length} prompts -> ${outFile}`);
