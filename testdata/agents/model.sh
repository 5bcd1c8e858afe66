#!/bin/sh
# A scripted agent that talks to its model through the gateway: MODEL_CALLS calls
# (default 1), each MODEL_SHAPE (anthropic, anthropic-stream, openai-chat,
# openai-chat-stream, openai-responses, openai-responses-stream; default anthropic),
# AGENT_TICK seconds apart. It records each answer in work/$CORRAL_TASK/ and exits 0.
set -e
mkdir -p "work/$CORRAL_TASK"
out="work/$CORRAL_TASK/result.txt"
: > "$out"
i=0
while [ "$i" -lt "${MODEL_CALLS:-1}" ]; do
	i=$((i + 1))
	for shape in ${MODEL_SHAPE:-anthropic}; do
		case "$shape" in
		anthropic) url="$ANTHROPIC_BASE_URL/v1/messages"; body='{"model":"claude-sonnet-4-5","max_tokens":64}' ;;
		anthropic-stream) url="$ANTHROPIC_BASE_URL/v1/messages"; body='{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true}' ;;
		openai-chat) url="$OPENAI_BASE_URL/chat/completions"; body='{"model":"gpt-4.1"}' ;;
		openai-chat-stream) url="$OPENAI_BASE_URL/chat/completions"; body='{"model":"gpt-4.1","stream":true,"stream_options":{"include_usage":true}}' ;;
		openai-responses) url="$OPENAI_BASE_URL/responses"; body='{"model":"gpt-5"}' ;;
		openai-responses-stream) url="$OPENAI_BASE_URL/responses"; body='{"model":"gpt-5","stream":true}' ;;
		esac
		curl -sS --fail -H "x-api-key: $ANTHROPIC_API_KEY" -H 'content-type: application/json' -d "$body" "$url" > /tmp/answer
		echo "call $i $shape: $(wc -c < /tmp/answer) bytes" >> "$out"
	done
	sleep "${AGENT_TICK:-0}"
done
echo "calls=$i key=${ANTHROPIC_API_KEY}" >> "$out"
