"""A tool-policy webhook for agentd, with nothing but the Python standard library.

    python3 examples/python/policy_webhook.py --listen 127.0.0.1:8090 --deny task_write

agentd POSTs each hook call of the agents that name this URL in `[[agents.webhooks]]` as the
proto's JSON mapping of `agentd.v1.HookCall`; the JSON answer is an `agentd.v1.HookAnswer`.
Here: a `before_tool_call` for a denied tool is skipped with an output the model reads as the
tool's result; everything else is allowed (an empty answer means "no change").
"""

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def answer(call, denied):
    """The HookAnswer (as JSON) for one HookCall."""
    before = call.get("beforeToolCall")
    if call.get("kind") == "HOOK_KIND_BEFORE_TOOL_CALL" and before and before.get("toolName") in denied:
        output = f"Tool {before['toolName']} is not allowed by policy"
        return {"id": call.get("id", ""), "beforeToolCall": {"proceed": False, "output": output}}
    return {"id": call.get("id", "")}


def serve(host, port, denied):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            try:
                call = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                self.send_error(400, "not JSON")
                return
            reply = answer(call, denied)
            tool = (call.get("beforeToolCall") or {}).get("toolName", "")
            verdict = "skip" if "beforeToolCall" in reply else "allow"
            print(f"{call.get('kind')} {tool} -> {verdict}", flush=True)
            body = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    ThreadingHTTPServer((host, port), Handler).serve_forever()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1:8090")
    parser.add_argument("--deny", action="append", default=[], help="a tool to skip (repeatable)")
    args = parser.parse_args()
    host, port = args.listen.rsplit(":", 1)
    print(f"policy webhook on http://{args.listen}/hooks, denying {sorted(args.deny)}", flush=True)
    serve(host, int(port), set(args.deny))


if __name__ == "__main__":
    main()
