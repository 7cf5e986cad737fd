#!/usr/bin/env bash
# Installs the Debian packages pinwheel needs that are missing:
#   (no argument)  third_party/packages.txt: the library and the sample
#                  trainer (the README's first Quick start line);
#   --python       also packages-python.txt and the Python package's
#                  virtual environment (third_party/install-python-deps.sh;
#                  its failure only skips the Python package);
#   --tests        also packages-tests.txt (GoogleTest, Open MPI, clang) and
#                  the venv with the tests' requirements too (torch, 4.6 GB:
#                  the README's test line passes it).
# Idempotent: when everything is present it only checks (well under a second)
# and touches nothing. Runs `apt-get update` only when something is missing,
# uses sudo only when not root. Prints one line saying what it did.
# The CUDA toolkit is optional and not installed here.
set -euo pipefail

dir="$(dirname "${BASH_SOURCE[0]}")"
lists=("$dir/packages.txt")
python=0
python_args=()
for arg in "$@"; do
  case "$arg" in
    --python) python=1 ;;
    --tests) python=1 python_args+=(--tests) ;;
    *)
      echo "install-deps: unknown argument '$arg' (usage: $0 [--python] [--tests])" >&2
      exit 2
      ;;
  esac
done
if ((python)); then
  lists+=("$dir/packages-python.txt")
fi
if ((${#python_args[@]})); then
  lists+=("$dir/packages-tests.txt")
fi

python_deps() {
  if ((python)); then
    bash "$dir/install-python-deps.sh" "${python_args[@]}"
  fi
}

mapfile -t packages < <(sed -e 's/#.*//' "${lists[@]}" | awk 'NF { print $1 }')

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
