// The official `openai` package against poot serve: node openai-client.mjs
// BASE_URL GEN_CHAT_JSONL. A chat completion, whole and streamed, gives
// poot generate's greedy text (GEN_CHAT_JSONL's first line); /v1/models
// lists the model; a refused request is the client's BadRequestError with
// the field named. Prints one line a check; exits 1 on the first failure.
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';

const [baseURL, genPath] = process.argv.slice(2);
const want = JSON.parse(readFileSync(genPath, 'utf8').split('\n')[0]).text;
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0 });
const messages = [{ role: 'user', content: 'hello' }];

function check(cond, what, got) {
  if (cond) return;
  console.error(`FAIL: ${what}; got ${JSON.stringify(got)}`);
  process.exit(1);
}

const whole = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 12, temperature: 0 });
check(whole.choices[0].message.content === want && whole.choices[0].finish_reason === 'length',
      "the greedy text is poot generate's", [whole, want]);
console.log("chat: poot generate's text");

const stream = await client.chat.completions.create({
  model: 'tiny', messages, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true },
});
let text = '', finish = null, usage = null, chunks = 0;
for await (const chunk of stream) {
  chunks++;
  const c = chunk.choices[0];
  if (c) {
    text += c.delta.content ?? '';
    finish = c.finish_reason ?? finish;
  }
  usage = chunk.usage ?? usage;
}
check(text === want && finish === 'length' && usage?.completion_tokens === 12, 'the streamed text and usage',
      { text, finish, usage });
console.log(`chat stream: ${chunks} chunks, the same text`);

const models = await client.models.list();
check(models.data.map((m) => m.id).join() === 'tiny', 'the model list', models.data);
console.log('models: tiny');

try {
  await client.chat.completions.create({ model: 'tiny', messages, n: 2 });
  check(false, 'n = 2 is refused', null);
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'n', "a 400 the client reads", String(e));
  console.log(`400: param ${e.param}: ${e.message}`);
}
