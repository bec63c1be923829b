#!/bin/bash
# usage: c.sh PATH JSON
curl -s -m 120 -w '\nHTTP %{http_code}\n' localhost:8106$1 -H 'Content-Type: application/json' -d "$2"
