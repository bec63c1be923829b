H=localhost:8797
curl -s $H/v1/chat/completions -H 'Content-Type: application/json' -d '{"model":"rwkv-7","messages":[{"role":"user","content":"weather in Paris?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city","unit"]}}}],"tool_choice":"required","max_tokens":60,"seed":1}'
echo; echo ----
curl -sN $H/v1/chat/completions -H 'Content-Type: application/json' -d '{"model":"rwkv-7","stream":true,"messages":[{"role":"user","content":"weather in Paris?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city","unit"]}}}],"tool_choice":"required","max_tokens":60,"seed":1}'
echo; echo ----
curl -sN $H/v1/tasks/tmp -H 'Content-Type: application/json' -d '{"prompt":"User: hi\n\nAssistant:","max_tokens":40,"stream":true,"seed":3,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"}},"required":["a","b"]}}}}'
echo; echo ----
curl -s $H/v1/tasks/create -H 'Content-Type: application/json' -d '{"prompt":"User: hi\n\nAssistant:","max_tokens":40,"seed":3,"response_format":{"type":"json_object"}}'
