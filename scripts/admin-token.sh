#!/usr/bin/env bash
# Prints the local admin token, the bearer token of the services' /admin that
# choreoctl reads from the same file (internal/admintoken: the path below).
# With -new, or when the file holds none, a random token is generated and
# written there first, readable by its owner only. make run generates one at
# each start; make up keeps the one it finds, so the containers are not
# recreated for a new token.
set -euo pipefail
file="${CHOREO_ADMIN_TOKEN_FILE:-${XDG_CACHE_HOME:-$HOME/.cache}/choreo/admin-token}"
if [[ "${1:-}" == "-new" || ! -s "$file" ]]; then
  mkdir -p "$(dirname "$file")"
  (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$file.tmp" && echo >>"$file.tmp" && mv "$file.tmp" "$file")
fi
tr -d ' \n' <"$file"
