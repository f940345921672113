// llama.cpp (npm node-llama-cpp, its prebuilt CPU libraries; never built here) decoding the models
// of write_models.py: one thread (and two for the stories15M models: "models_t2"), greedy, batch 1.
//   generate: 63 tokens after a 1-token prompt (as bench_models' */generate/ctformer), timed from
//             the prompt's evaluation to the 63rd token; tokens/s = 63 / time
//   prefill:  a 64-token prompt evaluated into an empty context (its first token's logits), in µs
// Best of `reps` runs per model. Writes JSON: {"models": {name: {"generate_us", "tokens_per_s",
// "prefill_us", "call_us"}}, "cpu": ...}.
// Usage: LLAMA_NODE_PATH=<node_modules> node bench_llama_cpp.mjs MODEL_DIR OUT.json REPS
import path from "node:path";
import fs from "node:fs";
import { pathToFileURL } from "node:url";

const [dir, outFile, repsArg] = process.argv.slice(2);
const reps = Number(repsArg || 5);
const mod = await import(pathToFileURL(path.join(process.env.LLAMA_NODE_PATH, "node-llama-cpp", "dist", "index.js")));
const llama = await mod.getLlama({ gpu: false, build: "never", logLevel: "error" });
const models = ["stories15M", "stories15M_gqa", "gpt2_d256", "stories15M_q8_0", "stories15M_q4_0", "stories15M_q4_k_m"];
const models_t2 = ["stories15M", "stories15M_q8_0", "stories15M_q4_0", "stories15M_q4_k_m"];
const result = { models: {}, models_t2: {}, threads: 1, reps };
const now = () => Number(process.hrtime.bigint()) / 1e3;  // µs

const runs = [...models.map((m) => [m, 1]), ...models_t2.map((m) => [m, 2])];
for (const [name, threads] of runs) {
    const model = await llama.loadModel({ modelPath: path.join(dir, name + ".gguf") });
    const ctx = await model.createContext({ contextSize: 256, threads, batchSize: 64, sequences: 1 });
    const seq = ctx.getSequence();
    let best = { generate_us: Infinity, prefill_us: Infinity, call_us: Infinity };
    for (let r = 0; r < reps + 1; ++r) {  // the first run warms up and is not kept
        // generation: 1 prompt token, then 63 generated
        await seq.clearHistory();
        let t0 = now(), n = 0;
        for await (const tok of seq.evaluate([5], { temperature: 0 })) {
            if (++n === 63) break;
        }
        const gen = now() - t0;
        // prefill of 64 tokens: the time to the first generated token
        await seq.clearHistory();
        const prompt = Array.from({ length: 64 }, (_, i) => 300 + i);
        t0 = now();
        for await (const tok of seq.evaluate(prompt, { temperature: 0 })) break;
        const pre = now() - t0;
        // the Node call's own cost: one more token after the prompt
        t0 = now();
        for await (const tok of seq.evaluate([7], { temperature: 0 })) break;
        const call = now() - t0;
        if (r > 0) {
            best.generate_us = Math.min(best.generate_us, gen);
            best.prefill_us = Math.min(best.prefill_us, pre);
            best.call_us = Math.min(best.call_us, call);
        }
    }
    best.tokens_per_s = 63 / (best.generate_us / 1e6);
    result[threads === 1 ? "models" : "models_t2"][name] = best;
    console.error(name, threads, JSON.stringify(best));
    await ctx.dispose();
    await model.dispose();
}
fs.writeFileSync(outFile, JSON.stringify(result, null, 1));
