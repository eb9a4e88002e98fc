// kvlm serve end to end with the official openai client (v6). Run by serve_e2e_test.cpp:
//   node serve_e2e.mjs --kvlm BIN --gpt2 DIR --llama DIR --llama-short DIR
// Every server listens on a free 127.0.0.1 port (--port 0, read back from its ready line) and
// is killed when the script ends, whatever happens; every wait is bounded; the whole run has a
// deadline. Exit code 0 when every check passed.
import { spawn, spawnSync } from "node:child_process";
import assert from "node:assert/strict";
import OpenAI from "openai";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith("--") ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []),
);
const DEADLINE_MS = 240_000;
const servers = new Set();

function killAll() {
  for (const s of servers) if (s.exitCode === null) s.kill("SIGKILL");
}
process.on("exit", killAll);
const deadline = setTimeout(() => {
  console.error(`FAIL: the run passed its ${DEADLINE_MS / 1000} s deadline`);
  killAll();
  process.exit(1);
}, DEADLINE_MS);

// Starts kvlm serve; resolves once its ready line names the port.
function startServer(model, extra = []) {
  const child = spawn(args.kvlm, ["serve", "--model", model, "--host", "127.0.0.1", "--port", "0", "--threads", "2", ...extra], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  servers.add(child);
  child.log = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server not ready in 30 s:\n${child.log}`)), 30_000);
    child.stderr.on("data", (d) => {
      child.log += d;
      const m = /ready on http:\/\/127\.0\.0\.1:(\d+)/.exec(child.log);
      if (m && !child.url) {
        clearTimeout(timer);
        child.url = `http://127.0.0.1:${m[1]}`;
        resolve(child);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      if (!child.url) reject(new Error(`server exited with ${code} before ready:\n${child.log}`));
    });
  });
}

function client(server, apiKey = "none") {
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey, maxRetries: 0, timeout: 60_000 });
}

async function post(server, path, body, headers = {}) {
  const res = await fetch(server.url + path, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

async function metrics(server) {
  const text = await (await fetch(server.url + "/metrics")).text();
  const value = (name) => {
    const m = new RegExp(`^${name.replace(/[{}"=]/g, (c) => "\\" + c)} (\\S+)$`, "m").exec(text);
    return m ? Number(m[1]) : NaN;
  };
  return { text, value };
}

// Polls until check() is true: at most `tries` times, 100 ms apart.
async function eventually(check, what, tries = 100) {
  for (let i = 0; i < tries; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`timed out waiting for ${what}`);
}

async function expectError(promise, status, pattern) {
  try {
    await promise;
  } catch (e) {
    assert.equal(e.status, status, `status of ${e.message}`);
    if (pattern) assert.match(e.message, pattern);
    return e;
  }
  assert.fail(`expected HTTP ${status}`);
}

async function collectStream(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

// The text of each choice, concatenated from a stream's chunks (completions or chat).
function streamedTexts(chunks) {
  const texts = [];
  for (const c of chunks) {
    for (const ch of c.choices) texts[ch.index] = (texts[ch.index] ?? "") + (ch.text ?? ch.delta?.content ?? "");
  }
  return texts;
}

const checks = [];
const check = (name, fn) => checks.push({ name, fn });

let gpt2, llama, small;

check("health, models, tokenize, detokenize", async () => {
  const health = await fetch(gpt2.url + "/health");
  assert.equal(health.status, 200);
  assert.deepEqual(await health.json(), { status: "ok" });
  const models = await client(gpt2).models.list();
  assert.equal(models.data[0].id, "gpt2");
  const tok = await post(gpt2, "/tokenize", { content: "Hi!" });
  assert.equal(tok.status, 200);
  assert.deepEqual(JSON.parse(tok.body).tokens, [72, 105, 33]);
  const detok = await post(gpt2, "/detokenize", { tokens: [72, 105, 33] });
  assert.equal(JSON.parse(detok.body).content, "Hi!");
});

check("completions: string, ids, list, usage", async () => {
  const c = client(gpt2);
  const base = { model: "gpt2", max_tokens: 8, temperature: 0 };
  const text = await c.completions.create({ ...base, prompt: "Hello" });
  assert.equal(text.object, "text_completion");
  assert.equal(text.choices.length, 1);
  assert.ok(["length", "stop"].includes(text.choices[0].finish_reason));
  assert.equal(text.usage.prompt_tokens, 5);
  assert.equal(text.usage.total_tokens, text.usage.prompt_tokens + text.usage.completion_tokens);
  const ids = await c.completions.create({ ...base, prompt: [72, 101, 108, 108, 111] });
  assert.equal(ids.choices[0].text, text.choices[0].text, "ids prompt == its text");
  const list = await c.completions.create({ ...base, prompt: ["Hello", [87, 111]] });
  assert.deepEqual(list.choices.map((x) => x.index), [0, 1]);
  assert.equal(list.choices[0].text, text.choices[0].text);
  const solo = await c.completions.create({ ...base, prompt: [87, 111] });
  assert.equal(list.choices[1].text, solo.choices[0].text);
  assert.equal(list.usage.prompt_tokens, 7);
});

check("completions: n, echo, logprobs, seed", async () => {
  const c = client(gpt2);
  const req = { model: "gpt2", prompt: "Once", max_tokens: 12, temperature: 1, seed: 7, n: 3 };
  const a = await c.completions.create(req);
  const b = await c.completions.create(req);
  assert.equal(a.choices.length, 3);
  assert.deepEqual(a.choices.map((x) => x.text), b.choices.map((x) => x.text), "same seed, same texts");
  const solo = await c.completions.create({ ...req, n: 1 });
  assert.equal(a.choices[0].text, solo.choices[0].text, "choice 0 == the n=1 answer");
  assert.notDeepEqual(new Set(a.choices.map((x) => x.text)).size, 1, "choices draw different streams");
  const echo = await c.completions.create({ ...req, n: 1, echo: true });
  assert.equal(echo.choices[0].text, "Once" + solo.choices[0].text);
  const lp = await c.completions.create({ ...req, n: 1, logprobs: 2, ignore_eos: true });
  const l = lp.choices[0].logprobs;
  assert.equal(l.tokens.length, 12);
  assert.equal(l.token_logprobs.length, 12);
  assert.ok(l.token_logprobs.every((x) => x <= 0));
  assert.ok(l.top_logprobs.every((t) => Object.keys(t).length >= 1 && Object.keys(t).length <= 2));
  const plain = await c.completions.create({ ...req, n: 1, ignore_eos: true });
  assert.equal(lp.choices[0].text, plain.choices[0].text, "logprobs do not change the text");
  assert.ok(l.text_offset.every((x, i) => i === 0 || x > l.text_offset[i - 1]), "text offsets ascend");
});

check("n choices share the prompt's cached blocks", async () => {
  const hits = async () => (await metrics(gpt2)).value("kvlm:prefix_cache_hits_total");
  const before = await hits();
  // 40 byte tokens: two full blocks of 16, computed once, found by the two other choices.
  const r = await client(gpt2).completions.create({ model: "gpt2", prompt: "x".repeat(40), n: 3, max_tokens: 4, seed: 1 });
  assert.equal(r.choices.length, 3);
  assert.equal(r.usage.prompt_tokens, 40, "the prompt counts once");
  assert.ok((await hits()) - before >= 2 * 32, `prefix hits grew by ${(await hits()) - before}`);
});

check("chat on a model without a template: 400", async () => {
  const e = await expectError(
    client(gpt2).chat.completions.create({ model: "gpt2", messages: [{ role: "user", content: "hi" }] }),
    400,
    /no chat template/,
  );
  assert.match(e.message, /\/v1\/completions/);
  assert.match(e.message, /--chat-template/);
});

check("streaming == whole (completions), usage chunk, one id", async () => {
  const c = client(gpt2);
  const req = { model: "gpt2", prompt: "Stream me", max_tokens: 24, temperature: 0.8, seed: 3, n: 2 };
  const whole = await c.completions.create(req);
  const chunks = await collectStream(await c.completions.create({ ...req, stream: true, stream_options: { include_usage: true } }));
  assert.deepEqual(streamedTexts(chunks), whole.choices.map((x) => x.text));
  assert.equal(new Set(chunks.map((x) => x.id)).size, 1, "one id per stream");
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.deepEqual(last.usage, whole.usage);
  const finals = chunks.flatMap((x) => x.choices).filter((ch) => ch.finish_reason);
  assert.deepEqual(finals.map((ch) => ch.finish_reason).sort(), whole.choices.map((x) => x.finish_reason).sort());
});

check("32 concurrent streaming clients each equal their solo run", async () => {
  const c = client(gpt2);
  const reqs = Array.from({ length: 32 }, (_, i) => ({
    model: "gpt2",
    prompt: `Client ${i} says ${"x".repeat(i % 7)}`,
    max_tokens: 16 + (i % 5),
    temperature: 0.9,
    seed: 100 + i,
  }));
  const solo = [];
  for (const r of reqs) solo.push((await c.completions.create(r)).choices[0].text);
  const streamed = await Promise.all(reqs.map(async (r) => streamedTexts(await collectStream(await c.completions.create({ ...r, stream: true })))[0]));
  streamed.forEach((text, i) => assert.equal(text, solo[i], `client ${i}`));
});

check("errors: every class in OpenAI's shape", async () => {
  const c = client(gpt2);
  const malformed = await post(gpt2, "/v1/completions", '{"prompt": "x",');
  assert.equal(malformed.status, 400);
  const body = JSON.parse(malformed.body);
  assert.deepEqual(Object.keys(body.error).sort(), ["code", "message", "param", "type"]);
  let e = await expectError(c.completions.create({ model: "gpt2", prompt: "x", max_tokens: "many" }), 400, /max_tokens: expected an integer/);
  assert.equal(e.param, "max_tokens");
  await expectError(c.completions.create({ model: "gpt2", prompt: "x", temperature: 3 }), 400, /temperature/);
  await expectError(c.completions.create({ model: "gpt2", prompt: "" }), 400, /empty/);
  await expectError(c.completions.create({ model: "gpt2", prompt: [5, 999999] }), 400, /outside the vocabulary \[0, 257\)/);
  e = await expectError(c.completions.create({ model: "gpt2", prompt: "abc", max_tokens: 1022 }), 400, /maximum context length is 1024.*1025 tokens \(3 in the prompt, 1022 for the completion\)/);
  assert.equal(e.code, "context_length_exceeded");
  await expectError(c.completions.create({ model: "nope", prompt: "x" }), 404, /does not exist/);
  const unknown = await fetch(gpt2.url + "/v1/nothing");
  assert.equal(unknown.status, 404);
  assert.equal((await unknown.json()).error.code, "not_found");
  const big = await post(gpt2, "/v1/completions", { prompt: "y".repeat(200_000) });
  assert.equal(big.status, 413);
  assert.equal(JSON.parse(big.body).error.code, "request_too_large");
  // The server still answers.
  assert.equal((await c.completions.create({ model: "gpt2", prompt: "ok", max_tokens: 2 })).choices.length, 1);
});

check("a client leaving mid-stream frees its blocks", async () => {
  const c = client(gpt2);
  const before = (await metrics(gpt2)).value('kvlm:request_success_total{finished_reason="abort"}');
  const stream = await c.completions.create({ model: "gpt2", prompt: "Leave", max_tokens: 1000, ignore_eos: true, temperature: 0, stream: true });
  let seen = 0;
  for await (const chunk of stream) if (++seen === 3) break; // break aborts the HTTP request
  await eventually(async () => {
    const m = await metrics(gpt2);
    return m.value("kvlm:num_requests_running") === 0 && m.value("kvlm:kv_cache_usage_perc") === 0;
  }, "running 0 and KV usage 0 after the disconnect");
  const after = (await metrics(gpt2)).value('kvlm:request_success_total{finished_reason="abort"}');
  assert.equal(after, before + 1, "the request was cancelled, not finished");
});

check("a full queue answers 503 with Retry-After", async () => {
  // --max-seqs 1 --max-queue 0: one sequence at a time. Two choices can never fit (400)...
  const two = await post(small, "/v1/completions", { prompt: "ab", n: 2, max_tokens: 2 });
  assert.equal(two.status, 400);
  assert.equal(JSON.parse(two.body).error.code, "too_many_sequences");
  // ... and a request arriving while a long one runs is refused, to be retried.
  const c = client(small);
  const stream = await c.completions.create({ model: "gpt2", prompt: "Long", max_tokens: 1000, ignore_eos: true, stream: true });
  const it = stream[Symbol.asyncIterator]();
  await it.next();
  const busy = await post(small, "/v1/completions", { prompt: "ab", max_tokens: 2 });
  assert.equal(busy.status, 503);
  assert.equal(busy.headers.get("retry-after"), "1");
  assert.equal(JSON.parse(busy.body).error.code, "queue_full");
  await it.return();
  await eventually(async () => (await metrics(small)).value("kvlm:num_requests_running") === 0, "the long request cancelled");
  assert.match((await metrics(small)).text, /kvlm:request_rejected_total 1/);
});

check("chat (Llama 2 template): auth, whole, streamed == whole", async () => {
  await expectError(client(llama, "wrong").chat.completions.create({ model: "llama", messages: [{ role: "user", content: "hi" }] }), 401, /API key/);
  const noKey = await post(llama, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }] });
  assert.equal(noKey.status, 401);
  assert.equal((await fetch(llama.url + "/health")).status, 200, "/health needs no key");
  const c = client(llama, "secret");
  const req = { model: "llama", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "hello world" }], max_tokens: 20, temperature: 0.7, seed: 11 };
  const whole = await c.chat.completions.create(req);
  assert.equal(whole.object, "chat.completion");
  assert.equal(whole.choices[0].message.role, "assistant");
  assert.equal(typeof whole.choices[0].message.content, "string");
  assert.ok(whole.usage.prompt_tokens > 10);
  const chunks = await collectStream(await c.chat.completions.create({ ...req, stream: true }));
  assert.equal(chunks[0].choices[0].delta.role, "assistant");
  assert.equal(new Set(chunks.map((x) => x.id)).size, 1);
  assert.equal(streamedTexts(chunks)[0], whole.choices[0].message.content);
  assert.equal(chunks.at(-1).choices[0].finish_reason, whole.choices[0].finish_reason);
  const lp = await c.chat.completions.create({ ...req, logprobs: true, top_logprobs: 3 });
  assert.equal(lp.choices[0].message.content, whole.choices[0].message.content);
  assert.ok(lp.choices[0].logprobs.content.every((t) => t.top_logprobs.length === 3 && t.logprob <= 0));
  // logprobs: true alone (top_logprobs 0): each token's own logprob, the same values, no alternatives.
  const own = await c.chat.completions.create({ ...req, logprobs: true });
  assert.equal(own.choices[0].message.content, whole.choices[0].message.content);
  assert.deepEqual(own.choices[0].logprobs.content.map((t) => t.logprob),
                   lp.choices[0].logprobs.content.map((t) => t.logprob));
  assert.ok(own.choices[0].logprobs.content.every((t) => t.top_logprobs.length === 0));
});

check("--kv-window: requests run past the context, bounded by the window's memory", async () => {
  // A Llama of context 48. 10 blocks of 4 positions (192 bytes each): a sequence's window holds
  // at most 9 of them, where the 123 positions of the request below would take 31 without it.
  const server = await startServer(args["llama-short"], ["--model-name", "llama", "--kv-window", "16", "--sink-tokens", "4", "--block-size", "4", "--kv-memory", "7680"]);
  assert.match(server.log, /--kv-window 16 --sink-tokens 4/);
  const c = client(server);
  const req = { model: "llama", prompt: [1, 5, 9], max_tokens: 120, temperature: 0, ignore_eos: true };
  const whole = await c.completions.create(req);
  assert.equal(whole.usage.completion_tokens, 120);
  assert.equal(whole.choices[0].finish_reason, "length");
  const chunks = await collectStream(await c.completions.create({ ...req, stream: true }));
  assert.equal(streamedTexts(chunks)[0], whole.choices[0].text);
  // A prompt longer than the context is taken too.
  const long = await c.completions.create({ ...req, prompt: Array.from({ length: 70 }, (_, i) => 3 + i), max_tokens: 5 });
  assert.equal(long.usage.prompt_tokens, 70);
  assert.equal(long.usage.completion_tokens, 5);
  assert.equal((await metrics(server)).value("kvlm:kv_cache_blocks_total"), 10);
  server.kill("SIGTERM");
  // Without the window the same request is beyond the context.
  const plain = await startServer(args["llama-short"], ["--model-name", "llama"]);
  const e = await expectError(client(plain).completions.create(req), 400, /maximum context length is 48.*123 tokens/);
  assert.equal(e.code, "context_length_exceeded");
  plain.kill("SIGTERM");
});

check("--weights q4_0: the served model is the one `kvlm generate --weights q4_0` runs", async () => {
  const server = await startServer(args.gpt2, ["--model-name", "gpt2", "--weights", "q4_0"]);
  assert.match(server.log, /--weights q4_0 \(matrices Q4_0 x \d+\)/);
  const prompt = [72, 101, 108, 108, 111];
  const served = await client(server).completions.create({ model: "gpt2", prompt, max_tokens: 12, temperature: 0 });
  const local = spawnSync(args.kvlm, ["generate", "--model", args.gpt2, "--weights", "q4_0", "--ids", prompt.join(","), "--max-new", "12", "--json", "--threads", "1"], { encoding: "utf8", timeout: 60_000 });
  assert.equal(local.status, 0, local.stderr);
  assert.equal(served.choices[0].text, JSON.parse(local.stdout).sequences[0].text);
  server.kill("SIGTERM");
});

check("SIGTERM: open streams end with [DONE], exit code 0", async () => {
  const server = await startServer(args.gpt2, ["--model-name", "gpt2"]);
  const stream = await client(server).completions.create({ model: "gpt2", prompt: "Bye", max_tokens: 1000, ignore_eos: true, stream: true });
  const exited = new Promise((resolve) => server.on("exit", (code, signal) => resolve({ code, signal })));
  let finish = null;
  let n = 0;
  for await (const chunk of stream) {
    if (++n === 2) server.kill("SIGTERM");
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, "abort", "the stream ended with a final chunk");
  const result = await Promise.race([exited, new Promise((r) => setTimeout(() => r("timeout"), 15_000))]);
  assert.deepEqual(result, { code: 0, signal: null });
  assert.match(server.log, /received SIGTERM/);
});

let failed = 0;
try {
  [gpt2, llama, small] = await Promise.all([
    startServer(args.gpt2, ["--model-name", "gpt2", "--max-body", "64KiB", "--max-seqs", "8"]),
    startServer(args.llama, ["--model-name", "llama", "--api-key", "secret"]),
    startServer(args.gpt2, ["--model-name", "gpt2", "--max-seqs", "1", "--max-queue", "0"]),
  ]);
  for (const { name, fn } of checks) {
    const t0 = Date.now();
    try {
      await fn();
      console.log(`ok   ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${name}: ${e.stack ?? e}`);
    }
  }
} catch (e) {
  failed++;
  console.log(`FAIL set-up: ${e.stack ?? e}`);
}
if (failed) for (const s of servers) console.log(`--- server log ---\n${s.log}`);
clearTimeout(deadline);
killAll();
console.log(failed ? `${failed} check(s) failed` : `all ${checks.length} checks passed`);
process.exit(failed ? 1 : 0);
