"""chat-session.py POOT PKG WEIGHTS WORK: runs `poot chat` on three user
lines and a /clear, and checks its standard output against `poot generate
--chat` run on each conversation as it should stand at that turn: the
earlier turns with the replies chat gave, the next user message, and after
/clear only the last. Prints one line a reply that matches."""
import json
import subprocess
import sys

poot, pkg, weights, work = sys.argv[1:5]
common = ["--weights", weights, "--max-new", "6"]
lines = ["hello", "and then?", "/clear", "again"]
chat = subprocess.run([poot, "chat", pkg] + common, input="\n".join(lines) + "\n", capture_output=True, text=True,
                      check=True)

conversation, want = [], ""
for turn, line in enumerate(lines):
    if line == "/clear":
        conversation = []
        continue
    conversation.append({"role": "user", "content": line})
    prompts, out = "%s/turn%d.jsonl" % (work, turn), "%s/turn%d.out.jsonl" % (work, turn)
    with open(prompts, "w") as f:
        f.write(json.dumps(conversation) + "\n")
    subprocess.run([poot, "generate", pkg, "--prompts", prompts, "--chat", "--tokenizer", pkg, "--output", out] + common,
                   check=True, capture_output=True)
    with open(out) as f:
        reply = json.loads(f.readline())["text"]
    conversation.append({"role": "assistant", "content": reply})
    want += reply + "\n"
    print("turn %d: %d characters" % (turn, len(reply)))
if chat.stdout != want:
    sys.exit("poot chat wrote %r, poot generate's turns give %r" % (chat.stdout, want))
print("every reply equals poot generate's for the conversation so far")
