// Load benchmark of kvlm serve: starts `kvlm serve --random-model` (GPT-2 124M's shape, random
// weights, prompts as token ids) on a free 127.0.0.1 port, then at each concurrency level keeps
// that many streaming clients busy with requests of 32..512 prompt tokens and 64 new tokens,
// and reports requests/s, output tokens/s, time to first token and inter-token latency
// (p50/p99), measured by the client from the SSE stream. Plain fetch: no dependencies.
//   node bench/serve_bench.mjs [--kvlm build/kvlm] [--levels 1,4,16,64] [--requests 4,8,16,64]
//                              [--threads N] [--json] [--prefill-check 128,512]
// --prefill-check: time to first token of one request alone (fresh prompts of each length, three
// each, max_tokens 1) against a plain prefill of the same length without HTTP (`kvlm bench
// --engine --requests 1 --new-tokens 1`, which times the engine and a static batch), interleaved.
import { spawn } from "node:child_process";

const opt = { kvlm: "build/kvlm", levels: "1,4,16,64", requests: "4,8,16,64", threads: "0", json: false, "prefill-check": "" };
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i].replace(/^--/, "");
  if (a === "json") opt.json = true;
  else opt[a] = process.argv[++i];
}
const levels = opt.levels.split(",").map(Number);
const counts = opt.requests.split(",").map(Number);
const NEW_TOKENS = 64;

// Seeded prompts (xorshift), so every run sends the same work.
let state = 0x2545f491;
const rand = () => ((state ^= state << 13), (state ^= state >>> 17), (state ^= state << 5), (state >>> 0) / 2 ** 32);
const prompt = () => Array.from({ length: 32 + Math.floor(rand() * 481) }, () => Math.floor(rand() * 50000));

const server = spawn(opt.kvlm, ["serve", "--random-model", "--port", "0", "--threads", opt.threads, "--max-seqs", "64", "--max-queue", "256"], {
  stdio: ["ignore", "ignore", "pipe"],
});
process.on("exit", () => server.exitCode === null && server.kill("SIGKILL"));
const url = await new Promise((resolve, reject) => {
  let log = "";
  const timer = setTimeout(() => reject(new Error("server not ready in 120 s\n" + log)), 120_000);
  server.stderr.on("data", (d) => {
    log += d;
    const m = /ready on (http:\/\/127\.0\.0\.1:\d+)/.exec(log);
    if (m) {
      clearTimeout(timer);
      resolve(m[1]);
    }
  });
  server.on("exit", (code) => reject(new Error(`server exited with ${code}\n${log}`)));
});

// One streamed request: the arrival time of each token's chunk.
async function one(ids, maxTokens = NEW_TOKENS) {
  const t0 = performance.now();
  const res = await fetch(url + "/v1/completions", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt: ids, max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream: true }),
  });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const times = [];
  let buf = "";
  const decoder = new TextDecoder();
  for await (const part of res.body) {
    buf += decoder.decode(part, { stream: true });
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, end);
      buf = buf.slice(end + 2);
      if (!event.startsWith("data: {")) continue;
      const chunk = JSON.parse(event.slice(6));
      if (chunk.choices[0]?.finish_reason == null) times.push(performance.now());
    }
  }
  return { t0, times };
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : NaN;
};

const results = [];
for (let li = 0; li < levels.length; li++) {
  const c = levels[li];
  const work = Array.from({ length: counts[li] ?? c }, prompt);
  let next = 0;
  const done = [];
  const start = performance.now();
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (next < work.length) done.push(await one(work[next++]));
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const ttft = done.map((r) => r.times[0] - r.t0);
  const itl = done.flatMap((r) => r.times.slice(1).map((t, i) => t - r.times[i]));
  const tokens = done.reduce((n, r) => n + r.times.length, 0);
  const row = {
    concurrency: c,
    requests: done.length,
    prompt_tokens: work.reduce((n, p) => n + p.length, 0),
    seconds: +seconds.toFixed(2),
    requests_per_s: +(done.length / seconds).toFixed(3),
    output_tok_per_s: +(tokens / seconds).toFixed(1),
    ttft_ms_p50: +pct(ttft, 50).toFixed(0),
    ttft_ms_p99: +pct(ttft, 99).toFixed(0),
    itl_ms_p50: +pct(itl, 50).toFixed(1),
    itl_ms_p99: +pct(itl, 99).toFixed(1),
  };
  results.push(row);
  if (!opt.json) console.log(JSON.stringify(row));
}
// Plain prefill of `length` tokens, without HTTP: the engine bench's two timings of one request.
async function plainPrefill(length) {
  const out = await new Promise((resolve, reject) => {
    const p = spawn(opt.kvlm, ["bench", "--engine", "--json", "--requests", "1", "--new-tokens", "1", "--max-seqs", "1",
      "--min-prompt", String(length), "--max-prompt", String(length), "--threads", opt.threads], { stdio: ["ignore", "pipe", "ignore"] });
    let text = "";
    p.stdout.on("data", (d) => (text += d));
    p.on("exit", (code) => (code === 0 ? resolve(text) : reject(new Error(`kvlm bench exited ${code}`))));
  });
  const r = JSON.parse(out);
  return [r.ttft_p50_seconds * 1000, r.static_wall_seconds * 1000];
}

const median = (xs) => pct(xs, 50);
const prefill = [];
for (const length of opt["prefill-check"].split(",").filter(Boolean).map(Number)) {
  const served = [], plain = [];
  for (let rep = 0; rep < 3; rep++) {
    const ids = Array.from({ length }, () => Math.floor(rand() * 50000));
    const r = await one(ids, 1);
    served.push(r.times[0] - r.t0);
    if (rep < 2) plain.push(...(await plainPrefill(length)));
  }
  const row = { prompt_tokens: length, served_ttft_ms_median: +median(served).toFixed(0), plain_prefill_ms_median: +median(plain).toFixed(0) };
  row.ratio = +(row.served_ttft_ms_median / row.plain_prefill_ms_median).toFixed(3);
  prefill.push(row);
  if (!opt.json) console.log(JSON.stringify(row));
}
if (opt.json) console.log(JSON.stringify({ levels: results, prefill }, null, 2));
server.kill("SIGTERM");
