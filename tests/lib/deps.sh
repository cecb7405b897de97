#!/bin/sh
# Install the Debian packages named as arguments that are not installed yet.
# Idempotent and quick when everything is present; runs apt-get update first
# when something is missing (a fresh machine has no package lists).
missing=""
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
if [ "$(id -u)" != 0 ]; then
	echo "deps: not root; install these packages:$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
	{ echo "deps: apt-get failed" >&2; exit 1; }
