#!/usr/bin/env bash
# The development environment, installed with uv from requirements/lock.txt: every package pinned, so a
# fresh clone installs in seconds from uv's cache and a new release of a dependency changes nothing
# until `make lock` is run again. The lock is generated from pyproject.toml (dependencies and all
# its extras) and requirements/lock.in (the tested Airflow release, build backend, pip).
#
#   scripts/venv.sh install [VENV]   create VENV (default .venv) if needed and make it match the lock
#                                    exactly, with this checkout installed editable
#   scripts/venv.sh lock [ARGS]      regenerate requirements/lock.txt; ARGS go to `uv pip compile`
#                                    (--upgrade moves every pin, --upgrade-package NAME one)
#   scripts/venv.sh uv               print the path of the pinned uv
#
# uv is the one on PATH when it is the pinned version, else it is installed once with pip into the user's
# cache (~/.cache/airflow-provider-tfjob/uv-VERSION).
# PYTHON (default python3) is the interpreter of a new venv and the pip that installs uv.
set -euo pipefail

UV_VERSION=0.13.9
# The lock is resolved for one interpreter and platform: the ones of this project's machines and CI.
LOCK_PYTHON=3.11
LOCK_PLATFORM=x86_64-unknown-linux-gnu
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCK=requirements/lock.txt
SDK_LOCK=requirements/kubeflow-sdk.txt
PYTHON="${PYTHON:-python3}"
# A pin with a local version label (torch==2.13.0+cpu) names a build that PyPI does not serve (PyPI's
# torch 2.13.0 is the CUDA one, gigabytes of it): this machine's pip finds it in its find-links, so uv
# is given pip's find-links, when locking and when installing.
LOCAL_BUILD='^[A-Za-z0-9._-]+==[^ ]+\+[^ ]+'

die() { echo "venv.sh: $*" >&2; exit 1; }

# Runs "$@" with its output kept aside, shown only when it fails (pip warns about every local index
# that lacks a package, which is noise on success).
quietly() {
    local log; log=$(mktemp)
    if "$@" >"$log" 2>&1; then rm -f "$log"; else local code=$?; cat "$log" >&2; rm -f "$log"; return $code; fi
}

is_pinned_uv() { [[ -x "$1" && "$("$1" --version 2>/dev/null)" =~ ^uv\ ${UV_VERSION//./\\.}( |$) ]]; }

pinned_uv() {
    local found
    if found=$(command -v uv) && is_pinned_uv "$found"; then echo "$found"; return; fi
    # Kept beside uv's own cache, so that every clone after the first starts with it.
    local dir="${XDG_CACHE_HOME:-${HOME:-$ROOT/build}/.cache}/airflow-provider-tfjob/uv-$UV_VERSION"
    if ! is_pinned_uv "$dir/bin/uv"; then
        echo "==> installing uv $UV_VERSION with pip into $dir" >&2
        "$PYTHON" -m pip --version >/dev/null 2>&1 ||
            die "$PYTHON has no pip to install uv with: put uv $UV_VERSION on PATH or set PYTHON"
        rm -rf "$dir.partial" "$dir"
        # --target: no venv needed, and no user site or system packages touched.
        quietly "$PYTHON" -m pip install --disable-pip-version-check --no-warn-script-location \
            --target "$dir.partial" "uv==$UV_VERSION"
        mv "$dir.partial" "$dir"
    fi
    echo "$dir/bin/uv"
}

# pip's package sources (its configuration files and PIP_* variables) as uv options: its find-links, and
# with "all" its index and extra indexes too (this machine keeps many of the locked wheels in local
# ones, which spares a download when uv's cache is cold).
pip_sources() {
    local keys='find-links' key value values
    [[ "${1:-}" == all ]] && keys='find-links\|index-url\|extra-index-url'
    "$PYTHON" -m pip config list 2>/dev/null | sed -n "s/^[^=]*\.\($keys\)='\(.*\)'$/\1 \2/p" |
        while read -r key values; do for value in $values; do echo "$key $value"; done; done |
        sort -u | while read -r key value; do printf -- '--%s\n%s\n' "$key" "$value"; done
}

sources_of() { local -a found=(); while (($#)); do found+=("$2"); shift 2; done; echo "${found[*]:-none}"; }

install() {
    local venv="${1:-$ROOT/.venv}" uv python
    uv=$(pinned_uv)
    python="$venv/bin/python"
    [[ -x "$python" ]] || "$uv" venv --quiet --python "$PYTHON" "$venv"
    local version; version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    [[ "$version" == "$LOCK_PYTHON" ]] ||
        die "$LOCK is for Python $LOCK_PYTHON and $venv has Python $version: remove $venv and run again with PYTHON=python$LOCK_PYTHON (or install without the lock: pip install -e '.[test,examples]')"

    local -a sources; mapfile -t sources < <(pip_sources all)
    local requirements="$venv/.locked-requirements.txt"
    { cat "$ROOT/$LOCK"; echo "-e $ROOT"; } >"$requirements"
    echo "==> uv pip sync $LOCK into ${venv#"$ROOT"/} (with pip's sources: $(sources_of "${sources[@]}"))" >&2
    # Every version is pinned, so taking each from whichever source has it (not only from the first
    # index that knows the name) cannot change what is installed.
    "$uv" pip sync --quiet --python "$python" --build-constraints "$ROOT/$LOCK" \
        --index-strategy unsafe-best-match "${sources[@]}" "$requirements" || {
        local builds; builds=$(grep -o -E "$LOCAL_BUILD" "$ROOT/$LOCK" | tr '\n' ' ')
        [[ -z "$builds" ]] || echo "venv.sh: $builds: builds that PyPI does not serve, looked for in pip's sources ($(sources_of "${sources[@]}"); see: pip config list)" >&2
        die "uv could not install $LOCK"
    }
    quietly "$uv" pip check --python "$python" ||
        die "the packages in $venv do not fit together: pyproject.toml changed after the lock? run \`make lock\`"
    echo "==> $venv ready in $SECONDS s" >&2
}

lock() {
    local uv; uv=$(pinned_uv)
    cd "$ROOT"
    local -a command=(uv pip compile pyproject.toml requirements/lock.in --all-extras
        --python-version "$LOCK_PYTHON" --python-platform "$LOCK_PLATFORM")
    local -a find_links; mapfile -t find_links < <(pip_sources)
    command+=("${find_links[@]}")
    command+=("$@" -o "$LOCK")
    "$uv" "${command[@]:1}" --quiet --custom-compile-command "make lock, which runs: ${command[*]}"
    echo "==> $LOCK: $(grep -c -E '^[A-Za-z0-9._-]+==' "$LOCK") packages pinned" >&2
    # The Kubeflow SDK pins kubernetes below the provider's range, so its test runs it in a venv of its
    # own (tests/local/test_trainjob_sdk.py), installed from this lock of its own.
    local -a sdk=(uv pip compile requirements/kubeflow-sdk.in --python-version "$LOCK_PYTHON"
        --python-platform "$LOCK_PLATFORM" "$@" -o "$SDK_LOCK")
    "$uv" "${sdk[@]:1}" --quiet --custom-compile-command "make lock, which runs: ${sdk[*]}"
    echo "==> $SDK_LOCK: $(grep -c -E '^[A-Za-z0-9._-]+==' "$SDK_LOCK") packages pinned" >&2
}

case "${1:-}" in
    install) shift; install "$@" ;;
    lock) shift; lock "$@" ;;
    uv) pinned_uv ;;
    *) die "usage: scripts/venv.sh install [VENV] | lock [uv pip compile ARGS] | uv" ;;
esac
