// The independent reference for token ids in ChatTemplateTest: @lenml/tokenizers (a JavaScript port of
// Hugging Face's tokenizers, fetched by scripts/fetch-qwen3-tokenizer.sh) encodes each string of a JSON
// list without adding special tokens. usage: node encode_js.js TOKENIZER_DIR STRINGS.json -> JSON list of id lists
const fs = require('fs');
const path = require('path');
const dir = process.argv[2];
const { TokenizerLoader } = require(path.join(dir, 'js', 'dist', 'main.js'));
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8')),
  tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8')),
});
const strings = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
process.stdout.write(JSON.stringify(strings.map(s => tok.encode(s, { add_special_tokens: false }))));
