#!/bin/sh
# One task of a `sonar worker ... -- ./count-words.sh`: the task's input arrives on stdin as
# JSON (here a JSON string such as "to be or not to be"), and what this prints on stdout is the
# task's output (here JSON, as the step's "output": "json" asks). Exit 0 succeeds; any other
# exit fails the attempt, and the task is tried again up to its maxAttempts.
set -eu

input=$(cat)
# Plain sh, no jq: take the text between the string's quotes (escaped quotes are not handled).
text=$(printf '%s' "$input" | sed -e 's/^[[:space:]]*"//' -e 's/"[[:space:]]*$//')
if [ -z "$text" ]; then
  echo "task $SONAR_TASK_ID: the input is not a non-empty JSON string: $input" >&2
  exit 2
fi
words=$(printf '%s\n' "$text" | wc -w | tr -d ' ')

# The worker sets SONAR_RUN_ID, SONAR_TASK_ID and SONAR_ATTEMPT_ID for every task.
printf '{"task":"%s","words":%s}\n' "$SONAR_TASK_ID" "$words"
