#!/usr/bin/env bash
# Installs the Debian packages of third_party/packages.txt that are missing.
# Idempotent: when everything is present it only checks (well under a second)
# and touches nothing. Runs `apt-get update` only when something is missing,
# uses sudo only when not root. Prints one line saying what it did.
# The CUDA toolkit is optional and not installed here. Then the Python
# package's virtual environment (third_party/install-python-deps.sh; its
# failure only skips the Python package).
#   --tests  also what only the tests need (torch, 4.6 GB: the README's test
#            line passes it, the sample trainer's line does not)
set -euo pipefail

python_args=()
for arg in "$@"; do
  case "$arg" in
    --tests) python_args+=(--tests) ;;
    *)
      echo "install-deps: unknown argument '$arg' (usage: $0 [--tests])" >&2
      exit 2
      ;;
  esac
done

python_deps() {
  bash "$(dirname "${BASH_SOURCE[0]}")/install-python-deps.sh" "${python_args[@]}"
}

list="$(dirname "${BASH_SOURCE[0]}")/packages.txt"
mapfile -t packages < <(sed -e 's/#.*//' "$list" | awk 'NF { print $1 }')

missing=()
for package in "${packages[@]}"; do
  status="$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)"
  if [[ "$status" != "installed" ]]; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present, nothing to do"
  python_deps
  exit 0
fi

sudo=()
if [[ "$(id -u)" != 0 ]]; then
  if ! command -v sudo >/dev/null; then
    echo "install-deps: missing ${missing[*]}; not root and no sudo to install them" >&2
    exit 1
  fi
  sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q &&
       "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -q -y \
         --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "install-deps: failed to install ${missing[*]} (apt-get output above)" >&2
  exit 1
fi
echo "install-deps: installed ${missing[*]}"
python_deps
