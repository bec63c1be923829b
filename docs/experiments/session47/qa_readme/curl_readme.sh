#!/bin/bash
# README curl examples, literal except port 8101
P=${P:-8101}
echo "== echo logprobs"
curl -s http://localhost:$P/v1/completions -H "Content-Type: application/json" -d '{
  "model": "rwkv-7", "prompt": "The capital of France is Paris",
  "echo": true, "logprobs": 1, "max_tokens": 0}'
echo; echo "== chat curl (max_tokens 500 as README)"
time curl -s http://localhost:$P/v1/chat/completions -H "Content-Type: application/json" -d '{
  "model": "rwkv-7",
  "messages": [{"role": "system", "content": "You are a friendly assistant."},
               {"role": "user", "content": "What is photosynthesis?"}],
  "temperature": 0.7, "top_p": 0.9, "top_k": 50, "max_tokens": 500, "stream": false}' | head -c 600
echo; echo "== models"
curl -s localhost:$P/v1/models; echo
curl -s localhost:$P/v1/models/rwkv-7; echo
echo "== metrics head"
curl -s localhost:$P/metrics | grep -v '^#' | head -20
echo "== template create"
R=$(curl -s -X POST localhost:$P/v1/tasks/create -H "Content-Type: application/json" \
  -d '{"prompt": "User: You are a precise technical translator.\n\nAssistant: Understood.\n\n", "max_tokens": 0}')
echo "$R"
ID=$(echo "$R" | python -c 'import sys,json; print(json.load(sys.stdin)["task_id"])')
echo "== as_template"
curl -s -X POST localhost:$P/v1/tasks/$ID/as_template; echo
echo "== as_template?name=translator (same task again)"
curl -s -X POST "localhost:$P/v1/tasks/$ID/as_template?name=translator"; echo
echo "== fork stream"
curl -s -N -X POST localhost:$P/v1/tasks/_translator/fork -H "Content-Type: application/json" \
  -d '{"prompt": "User: Translate: Hello world\n\nAssistant:", "max_tokens": 100, "stream": true}' | head -c 800
echo; echo "== models after template"
curl -s localhost:$P/v1/models; echo
echo "== list"
curl -s "localhost:$P/v1/tasks/list?offset=0&limit=100"; echo
