// The reference renderings for test/text/chat-published.sh: a model's
// chat_template rendered by @huggingface/jinja (a JavaScript implementation
// of Jinja for chat templates, from the npm registry) with the variables
// transformers' apply_chat_template gives: messages, add_generation_prompt,
// tools and documents (null) and the special tokens of tokenizer_config.json
// (@huggingface/jinja defines raise_exception itself). Usage:
//   node chat-reference.mjs JINJA_INDEX_JS TOKENIZER_CONFIG CONVERSATIONS_JSONL OUT_DIR \
//     [TOKENIZERS_MAIN_MJS TOKENIZER_JSON]
// writes, for conversation N (its line, from 1) with add_generation_prompt G
// (1 or 0), OUT_DIR/N-G.txt: the rendered text, or "refused\n" where the
// template raises; with a tokenizer, also OUT_DIR/N-G.ids: the text's ids
// as @lenml/tokenizers encodes it without adding special tokens (as
// apply_chat_template(tokenize=True) does), on one line.
import fs from "node:fs";
import path from "node:path";

const [jinja, configPath, conversations, out, tokenizers, tokenizerJson] = process.argv.slice(2);
const { Template } = await import(jinja);
const config = JSON.parse(fs.readFileSync(configPath, "utf8"));
let tokenizer = null;
if (tokenizers) {
  const { TokenizerLoader } = await import(tokenizers);
  tokenizer = TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(tokenizerJson, "utf8")),
    tokenizerConfig: config,
  });
}
let source = config.chat_template;
if (Array.isArray(source)) source = source.find((t) => t.name === "default").template;
const template = new Template(source);
const tokens = {};
for (const name of ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]) {
  const t = config[name];
  if (t === null || t === undefined) continue;
  tokens[name] = typeof t === "string" ? t : t.content;
}
const lines = fs.readFileSync(conversations, "utf8").split("\n").filter((l) => l !== "");
lines.forEach((line, k) => {
  for (const generation of [1, 0]) {
    let text;
    try {
      text = template.render({
        messages: JSON.parse(line),
        add_generation_prompt: generation === 1,
        tools: null,
        documents: null,
        ...tokens,
      });
    } catch (e) {
      text = "refused\n";  // poot's output must then be a refusal by raise_exception
      console.error(`conversation ${k + 1}: ${e.message}`);
    }
    fs.writeFileSync(path.join(out, `${k + 1}-${generation}.txt`), text);
    if (tokenizer) {
      const ids = tokenizer.encode(text, { add_special_tokens: false });
      fs.writeFileSync(path.join(out, `${k + 1}-${generation}.ids`), ids.join(" ") + "\n");
    }
  }
});
