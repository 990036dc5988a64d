#!/usr/bin/env bash
# apt-get install PACKAGES without letting their maintainer scripts start system daemons
# (a policy-rc.d that denies every start, removed afterwards if it was not there before).
set -euo pipefail
added=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  added=1
fi
trap 'if [ -n "$added" ]; then rm -f /usr/sbin/policy-rc.d; fi' EXIT
(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@") >&2
