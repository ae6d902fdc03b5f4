"""Generates tests/unit/data/vllm_032_message_union.json from vLLM 0.32's message union."""
import json, sys
from pydantic import TypeAdapter, ValidationError
from vllm.renderers.chat_utils import ChatCompletionMessageParam
ta=TypeAdapter(ChatCompletionMessageParam)
cases=[]
for v in [True, 5, None, "s", {"a":1}, []]:
    for role in ["system","user","assistant","tool","developer","function","other"]:
        for field in ["tool_calls","name","reasoning","tool_call_id","tools","task","refusal"]:
            m={"role":role,"content":"x"}
            if role=="tool" and field!="tool_call_id": m["tool_call_id"]="a"
            if role=="function" and field!="name": m["name"]="f"
            m[field]=v
            cases.append(m)
out=[]
for m in cases:
    try: ta.validate_python(m); errs=[]
    except ValidationError as e: errs=[[x['type'],".".join(map(str,x['loc'])),x['msg']] for x in e.errors()]
    out.append({"message": m, "errors": errs})
json.dump(out, open(sys.argv[1],"w"), indent=0)
