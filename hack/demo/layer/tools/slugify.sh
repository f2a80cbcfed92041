#!/bin/sh
# Reads {"title": "..."} on standard input and prints the title's slug.
set -eu
title=$(sed -n 's/.*"title"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p')
if [ -z "$title" ]; then
	echo 'slugify: no "title" in the input' >&2
	exit 1
fi
printf '%s\n' "$title" | tr '[:upper:]' '[:lower:]' | tr -cs 'a-z0-9' '-' | sed 's/^-*//; s/-*$//'
