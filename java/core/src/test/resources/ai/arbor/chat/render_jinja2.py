"""The independent reference of ChatTemplateTest: renders chat templates with Python's jinja2 set up as
Hugging Face transformers sets it up for apply_chat_template (utils/chat_template_utils.py,
_compile_jinja_template): an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loop
controls, tojson = json.dumps(ensure_ascii=False, ...), raise_exception and strftime_now as globals.

usage: render_jinja2.py TOKENIZER_CONFIG CASES.json  -> a JSON list, one rendered string (or
{"error": message}) per case; a case is {"messages", "tools"?, "add_generation_prompt"?, "kwargs"?}.
"""
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def main():
    config = json.load(open(sys.argv[1], encoding="utf-8"))
    cases = json.load(open(sys.argv[2], encoding="utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    template = env.from_string(config["chat_template"] if "chat_template" in config else config["template"])
    # transformers passes the tokenizer's special tokens (those that are set) as variables
    specials = {k: config[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token") if isinstance(config.get(k), str)}
    out = []
    for case in cases:
        try:
            out.append(template.render(messages=case["messages"], tools=case.get("tools") or None,
                                       add_generation_prompt=case.get("add_generation_prompt", False),
                                       **specials, **case.get("kwargs", {})))
        except jinja2.exceptions.TemplateError as e:
            out.append({"error": str(e)})
    json.dump(out, sys.stdout, ensure_ascii=False)


main()
