"""Generates tests/unit/data/vllm_032_surface.json from vLLM 0.32 (run in its venv)."""
import dataclasses, json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.entrypoints.launchers import cli_args
from vllm.engine.arg_utils import EngineArgs, AsyncEngineArgs
from vllm.entrypoints.cli.serve import ServeSubcommand
import argparse
top = FlexibleArgumentParser()
subs = top.add_subparsers()
serve = ServeSubcommand().subparser_init(subs)
options = {}
for action in serve._actions:
    if not action.option_strings or action.dest == "help":
        continue
    longs = [o for o in action.option_strings if o.startswith("--") and not o.startswith("--no-")]
    options[action.dest] = sorted(set(longs))
engine = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
frontend = {f.name for f in dataclasses.fields(cli_args.FrontendArgs)} if hasattr(cli_args, "FrontendArgs") else set()
out = {"vllm_version": __import__("vllm").__version__,
       "serve_options": {d: {"flags": f, "kind": "engine" if d in engine else "frontend" if d in frontend else "serve"} for d, f in sorted(options.items())}}
def fields(cls):
    return sorted(cls.model_fields)
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.entrypoints.openai.completion.protocol import CompletionRequest
try:
    from vllm.entrypoints.scale_out.token_in_token_out.protocol import GenerateRequest
except ImportError:
    GenerateRequest = None
out["request_fields"] = {"chat": fields(ChatCompletionRequest), "completions": fields(CompletionRequest)}
if GenerateRequest is not None:
    out["request_fields"]["generate"] = fields(GenerateRequest)
json.dump(out, open(sys.argv[1], "w"), indent=1, sort_keys=True)
print(len(options), {k: len(v) for k, v in out["request_fields"].items()})
