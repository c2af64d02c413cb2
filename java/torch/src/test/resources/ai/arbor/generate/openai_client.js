// OpenAiClientTest's client: the official OpenAI JavaScript client (npm `openai`, fetched by
// scripts/fetch-openai-node.sh) against `arbor serve`, as an RL client drives vLLM: completions (text and
// token-id prompts, logprobs, n, seed, stop, stream), chat completions (the chat template, tools and
// tool_calls, logprobs, n, stream), the model list and errors (status, the OpenAI error shape).
// usage: node openai_client.js OPENAI_DIR BASE_URL MODEL MAX_MODEL_LEN
// Prints one JSON line per check ({"check": name, ...values the JUnit test compares}) and "ALL OK" last;
// a failed assertion exits non-zero with its message.
const assert = require('assert');
const [openaiDir, baseURL, model, maxModelLen] = process.argv.slice(2);
const mod = require(openaiDir);
const OpenAI = mod.OpenAI || mod.default || mod;
const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 120000 });

function report(check, values) {
  process.stdout.write(JSON.stringify({ check, ...values }) + '\n');
}

async function expectError(status, param, body, chat) {
  try {
    if (chat) await client.chat.completions.create(body);
    else await client.completions.create(body);
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, 'an APIError: ' + e);
    assert.strictEqual(e.status, status, JSON.stringify(body) + ' -> ' + e.message);
    assert.strictEqual(typeof e.error.message, 'string');
    assert.ok(e.error.message.length > 3);
    assert.strictEqual(e.param ?? null, param, 'param of ' + JSON.stringify(body) + ': ' + e.message);
    assert.strictEqual(e.code, status);
    assert.strictEqual(typeof e.type, 'string');
    return e;
  }
  assert.fail('no error for ' + JSON.stringify(body));
}

async function main() {
  // the model list: the served name and the context length
  const models = await client.models.list();
  assert.strictEqual(models.data.length, 1);
  assert.strictEqual(models.data[0].id, model);
  assert.strictEqual(models.data[0].max_model_len, Number(maxModelLen));
  report('models', {});

  // greedy completion with logprobs and token ids; the JUnit test checks the values against the model
  const g = await client.completions.create({ model, prompt: 'Hello, world', max_tokens: 8, temperature: 0, logprobs: 3,
    return_token_ids: true });
  assert.strictEqual(g.object, 'text_completion');
  assert.strictEqual(g.choices.length, 1);
  const gc = g.choices[0];
  assert.strictEqual(gc.logprobs.tokens.length, gc.token_ids.length);
  if (!gc.logprobs.tokens.some(t => t.includes('\uFFFD'))) assert.strictEqual(gc.logprobs.tokens.join(''), gc.text);
  for (let i = 0; i < gc.token_ids.length; i++) {
    const alts = Object.values(gc.logprobs.top_logprobs[i]);
    assert.ok(alts.length >= 1 && alts.length <= 3);
    // top_logprobs is keyed by the token's text, as vLLM's: two ids with one text (e.g. partial UTF-8 bytes) keep one
    // entry, so the greedy token's own entry may be missing; no alternative may beat it, and with all 3 there it is the
    // best (to 1e-5: the values travel as float32 printed to ~7 significant digits)
    const lp = gc.logprobs.token_logprobs[i], best = Math.max(...alts);
    assert.ok(best <= lp + 1e-5, 'no alternative is more likely than the greedy token: ' + JSON.stringify(gc.logprobs.top_logprobs[i]) + ' ' + lp);
    if (alts.length === 3) assert.ok(Math.abs(best - lp) < 1e-5, 'greedy takes the best alternative: ' + JSON.stringify(gc.logprobs.top_logprobs[i]) + ' ' + lp);
  }
  assert.strictEqual(g.usage.prompt_tokens, gc.prompt_token_ids.length);
  assert.strictEqual(g.usage.completion_tokens, gc.token_ids.length);
  assert.strictEqual(typeof g.metadata.weight_version, 'string');
  report('greedy', { prompt_token_ids: gc.prompt_token_ids, token_ids: gc.token_ids, token_logprobs: gc.logprobs.token_logprobs,
    finish_reason: gc.finish_reason, weight_version: g.metadata.weight_version });

  // the same prompt as token ids, tokens returned as ids: the same completion
  const ids = await client.completions.create({ model, prompt: gc.prompt_token_ids, max_tokens: 8, temperature: 0, logprobs: 0,
    return_tokens_as_token_ids: true });
  assert.strictEqual(ids.choices[0].text, gc.text);
  assert.deepStrictEqual(ids.choices[0].logprobs.tokens, gc.token_ids.map(t => 'token_id:' + t));
  report('token_ids_prompt', {});

  // n samples with a seed: sample i is the n = 1 request with seed + i; the samples differ
  const n = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, n: 3, seed: 77, logprobs: 0,
    return_token_ids: true });
  assert.strictEqual(n.choices.length, 3);
  assert.deepStrictEqual(n.choices.map(c => c.index), [0, 1, 2]);
  const one = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, seed: 78, return_token_ids: true });
  assert.deepStrictEqual(one.choices[0].token_ids, n.choices[1].token_ids);
  assert.ok(new Set(n.choices.map(c => c.text)).size > 1, 'the samples differ');
  assert.strictEqual(n.usage.completion_tokens, n.choices.reduce((s, c) => s + c.token_ids.length, 0));
  report('n', {});

  // a stop string: the text ends before it, finish_reason "stop", stop_reason the string
  const stopAt = n.choices[0].text.slice(4, 6);
  const st = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, seed: 77, stop: [stopAt] });
  assert.strictEqual(st.choices[0].finish_reason, 'stop');
  assert.strictEqual(st.choices[0].stop_reason, stopAt);
  assert.ok(n.choices[0].text.startsWith(st.choices[0].text) && !st.choices[0].text.includes(stopAt));
  const sst = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, seed: 77, stop: [stopAt],
    stream: true });
  let sstText = '', sstFinish = null;
  for await (const chunk of sst) for (const c of chunk.choices) {
    sstText += c.text;
    if (c.finish_reason) sstFinish = c.finish_reason;
  }
  assert.strictEqual(sstText, st.choices[0].text, 'a streamed stop: the held-back text never shows the stop string');
  assert.strictEqual(sstFinish, 'stop');
  report('stop', {});

  // streaming: the chunks of each choice add up to the non-streamed completion
  const stream = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, n: 3, seed: 77, logprobs: 0,
    stream: true, stream_options: { include_usage: true } });
  const texts = ['', '', ''], finish = [null, null, null], lps = [[], [], []];
  let chunks = 0, usage = null;
  for await (const chunk of stream) {
    chunks++;
    assert.strictEqual(chunk.object, 'text_completion');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      texts[c.index] += c.text;
      if (c.logprobs) lps[c.index].push(...c.logprobs.token_logprobs);
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  for (let i = 0; i < 3; i++) {
    assert.strictEqual(texts[i], n.choices[i].text, 'streamed choice ' + i);
    assert.strictEqual(finish[i], n.choices[i].finish_reason);
    assert.deepStrictEqual(lps[i], n.choices[i].logprobs.token_logprobs);
  }
  assert.ok(chunks > 3, 'token by token: ' + chunks + ' chunks');
  assert.strictEqual(usage.completion_tokens, n.usage.completion_tokens);
  report('stream', { chunks });

  // chat with a tool: the template renders it, the model's <tool_call> becomes message.tool_calls
  const tools = [{ type: 'function', function: { name: 'add', description: 'Adds two numbers.',
    parameters: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a'] } } }];
  const messages = [{ role: 'system', content: 'You can call tools.' }, { role: 'user', content: 'What is 1 plus 2?' }];
  const chat = await client.chat.completions.create({ model, messages, tools, temperature: 0, logprobs: true, top_logprobs: 2,
    return_token_ids: true });
  assert.strictEqual(chat.object, 'chat.completion');
  const cm = chat.choices[0];
  assert.strictEqual(cm.finish_reason, 'tool_calls');
  assert.strictEqual(cm.message.role, 'assistant');
  assert.strictEqual(cm.message.content, null);
  assert.strictEqual(cm.message.tool_calls.length, 1);
  const call = cm.message.tool_calls[0];
  assert.strictEqual(call.type, 'function');
  assert.ok(call.id.length > 0);
  assert.strictEqual(call.function.name, 'add');
  assert.deepStrictEqual(JSON.parse(call.function.arguments), { a: 1 });
  assert.strictEqual(cm.logprobs.content.length, cm.token_ids.length);
  for (const t of cm.logprobs.content) {
    assert.ok(t.top_logprobs.length === 2 && t.logprob <= 0 && Array.isArray(t.bytes));
    assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6, 'greedy takes the best alternative');
  }
  report('chat_tools', { prompt_token_ids: chat.prompt_token_ids, token_ids: cm.token_ids, arguments: call.function.arguments });

  // the next turn: the assistant's message as the client returned it, then the tool's result
  const turn2 = await client.chat.completions.create({ model, tools, temperature: 0, return_token_ids: true,
    messages: [...messages, cm.message, { role: 'tool', tool_call_id: call.id, content: '3' }] });
  assert.strictEqual(turn2.choices[0].finish_reason, 'tool_calls');
  report('chat_turn2', { prompt_token_ids: turn2.prompt_token_ids });

  // the same turn, tool calls not parsed (tool_choice "none"): the call is the content, finish_reason "stop"
  const none = await client.chat.completions.create({ model, messages, tools, tool_choice: 'none', temperature: 0 });
  assert.strictEqual(none.choices[0].finish_reason, 'stop');
  assert.strictEqual(none.choices[0].message.content, '<tool_call>{"name":"add","arguments":{"a":1}}</tool_call>');
  assert.strictEqual((none.choices[0].message.tool_calls || []).length, 0);
  // cut short: finish_reason "length"
  const short = await client.chat.completions.create({ model, messages, tools, temperature: 0, max_tokens: 3 });
  assert.strictEqual(short.choices[0].finish_reason, 'length');
  assert.strictEqual(short.choices[0].message.content, '<tool_call>{"name');
  report('chat_finish', {});

  // chat, n = 2, streamed: deltas rebuild the same tool call for both choices
  const cs = await client.chat.completions.create({ model, messages, tools, temperature: 0, n: 2, stream: true });
  const calls = [{}, {}], cfinish = [null, null], roles = [null, null];
  for await (const chunk of cs) {
    assert.strictEqual(chunk.object, 'chat.completion.chunk');
    for (const c of chunk.choices) {
      if (c.delta.role) roles[c.index] = c.delta.role;
      for (const tc of c.delta.tool_calls || []) {
        const acc = calls[c.index][tc.index] || (calls[c.index][tc.index] = { name: '', arguments: '' });
        if (tc.function.name) acc.name += tc.function.name;
        if (tc.function.arguments) acc.arguments += tc.function.arguments;
      }
      if (c.finish_reason) cfinish[c.index] = c.finish_reason;
    }
  }
  for (let i = 0; i < 2; i++) {
    assert.strictEqual(roles[i], 'assistant');
    assert.strictEqual(cfinish[i], 'tool_calls');
    assert.strictEqual(calls[i][0].name, 'add');
    assert.strictEqual(calls[i][0].arguments, call.function.arguments);
  }
  report('chat_stream', {});

  // errors: 4xx with the OpenAI error shape, the offending field named
  await expectError(400, 'n', { model, prompt: 'x', n: 0 });
  await expectError(400, 'temperature', { model, prompt: 'x', temperature: -1 });
  await expectError(400, 'prompt', { model, prompt: [1, 2, 99999999] });
  await expectError(400, 'max_tokens', { model, prompt: 'x', max_tokens: Number(maxModelLen) });
  await expectError(400, 'logprobs', { model, prompt: 'x', logprobs: 21 });
  await expectError(404, 'model', { model: 'no-such-model', prompt: 'x' });
  await expectError(400, 'messages', { model, messages: [] }, true);
  await expectError(400, 'tool_choice', { model, messages, tools, tool_choice: 'required' }, true);
  const nf = await fetch(baseURL + '/v1/nothing-here');
  assert.strictEqual(nf.status, 404);
  assert.strictEqual((await nf.json()).error.type, 'NotFoundError');
  const health = await fetch(baseURL + '/health');
  assert.strictEqual(health.status, 200);
  report('errors', {});
  process.stdout.write('ALL OK\n');
}

main().catch(e => {
  process.stderr.write('FAILED: ' + (e && e.stack || e) + '\n');
  process.exit(1);
});
