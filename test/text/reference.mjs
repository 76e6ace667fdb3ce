// The reference encodings for test/text/published.sh: Hugging Face's
// tokenizer format as @lenml/tokenizers (a JavaScript port of transformers.js'
// tokenizers, from the npm registry) reads it. Usage:
//   node reference.mjs TOKENIZERS_MAIN_MJS TOKENIZER_JSON CONFIG_JSON CORPUS SPECIAL
// prints, for each line of CORPUS, its ids separated by spaces (SPECIAL 1:
// add_special_tokens, 0: without).
import fs from "node:fs";

const [main, tokJson, cfgJson, corpus, special] = process.argv.slice(2);
const { TokenizerLoader } = await import(main);
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(tokJson, "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(cfgJson, "utf8")),
});
const lines = fs.readFileSync(corpus, "utf8").split("\n");
if (lines[lines.length - 1] === "") lines.pop();
for (const line of lines) {
  const ids = tokenizer.encode(line, { add_special_tokens: special === "1" });
  console.log(ids.join(" "));
}
