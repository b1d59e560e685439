#!/usr/bin/env bash
# The development environment, installed with uv from requirements/lock.txt: every package pinned, so a
# fresh clone installs in seconds from uv's cache and a new release of a dependency changes nothing
# until `make lock` is run again. The lock is generated from pyproject.toml (dependencies and all
# its extras) and requirements/lock.in (the tested Airflow release, build backend, pip).
#
#   scripts/venv.sh install [VENV]       create VENV (default .venv) if needed and make it match the lock
#                                        exactly, with this checkout installed editable
#   scripts/venv.sh install-demo [VENV]  the same with requirements/demo.txt, the part of the lock the
#                                        demo needs (`make demo` on a venv that never held the whole lock)
#   scripts/venv.sh lock [ARGS]          regenerate requirements/lock.txt (ARGS go to its `uv pip compile`:
#                                        --upgrade moves every pin, --upgrade-package NAME one), then
#                                        requirements/demo.txt and requirements/kubeflow-sdk.txt from it
#   scripts/venv.sh uv                   print the path of the pinned uv
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
DEMO_LOCK=requirements/demo.txt
SDK_LOCK=requirements/kubeflow-sdk.txt
PYTHON="${PYTHON:-python3}"
# A pin with a local version label (torch==2.13.0+cpu) names a build that PyPI does not serve (PyPI's
# torch 2.13.0 is the CUDA one, gigabytes of it). uv takes it from a folder named in pip's find-links
# that holds its wheel (this project's machines keep one), else from PyTorch's CPU index, which
# `--torch-backend cpu` makes uv ask for the PyTorch packages only (every other package comes from PyPI
# and pip's sources, as without it). uv fails when that index is unreachable, even if a folder has the
# wheel: so it is asked only when no folder has it.
LOCAL_BUILD='^[A-Za-z0-9._-]+==[^ ]+\+[^ ]+'
TORCH_INDEX=https://download.pytorch.org/whl/cpu

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

# Where uv takes the builds that PyPI does not serve among FILE's pins, given pip's sources as uv options
# (pip_sources): sets BUILDS (those pins, space-separated), BUILDS_FROM (the place, for messages) and
# BUILD_ARGS (uv's options for it). A folder named in pip's find-links (a path or a file:// URL) that
# holds a wheel of every such build is the place; else PyTorch's CPU index.
builds_source() {
    local file=$1 build name folder wheel found; shift
    local -a folders=() find_links=()
    while (($#)); do [[ "$1" != --find-links ]] || find_links+=("${2#file://}"); shift 2; done
    BUILDS=$(grep -o -E "$LOCAL_BUILD" "$file" | tr '\n' ' ' || true) BUILDS_FROM="" BUILD_ARGS=()
    BUILDS=${BUILDS% }
    for build in $BUILDS; do
        # A wheel's file name spells the project's name with underscores.
        name=${build%%==*} name=${name//[-.]/_} found=""
        for folder in "${find_links[@]}"; do
            for wheel in "$folder/$name-${build#*==}"-*.whl; do
                [[ -f "$wheel" ]] && { found=$folder; break 2; }
            done
        done
        if [[ -z "$found" ]]; then
            BUILD_ARGS=(--torch-backend cpu) BUILDS_FROM="PyTorch's CPU index $TORCH_INDEX"
            return 0
        fi
        [[ " ${folders[*]} " == *" $found "* ]] || folders+=("$found")
    done
    [[ -z "$BUILDS" ]] || BUILDS_FROM="pip's find-links (${folders[*]})"
}

# After uv failed to ACTION (install, lock) FILE with its output in LOG: one line that says what to
# configure when uv could not get a build that PyPI does not serve (builds_source), else uv's output and
# a line.
explain_failure() {
    local log=$1 action=$2 file=$3 build reason
    reason=$(sed -n 's/^ *\(error\|cause\): *//p' "$log" | tail -n 1)
    for build in $BUILDS; do
        grep -q -F -e "$build" -e "${build%%==*}-${build#*==}" -e "$TORCH_INDEX" "$log" || continue
        if [[ "${BUILD_ARGS[*]}" == *--torch-backend* ]]; then
            die "cannot $action $build (uv: $reason): PyPI does not serve PyTorch's CPU builds; make PyTorch's CPU index $TORCH_INDEX reachable, or name a folder that holds its wheel in pip's find-links (pip config set global.find-links DIR); uv's output: $log"
        fi
        die "cannot $action $build from $BUILDS_FROM (uv: $reason): put its wheel there again, or take that folder out of pip's find-links so that uv asks PyTorch's CPU index $TORCH_INDEX; uv's output: $log"
    done
    cat "$log" >&2
    die "uv could not $action $file"
}

# Makes VENV match LOCKFILE exactly, with this checkout installed editable.
sync_venv() {
    local venv=$1 lockfile=$2 uv python
    uv=$(pinned_uv)
    python="$venv/bin/python"
    [[ -x "$python" ]] || "$uv" venv --quiet --python "$PYTHON" "$venv"
    local version; version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    [[ "$version" == "$LOCK_PYTHON" ]] ||
        die "$lockfile is for Python $LOCK_PYTHON and $venv has Python $version: remove $venv and run again with PYTHON=python$LOCK_PYTHON (or install without the lock: pip install -e '.[test,examples]')"

    local -a sources; mapfile -t sources < <(pip_sources all)
    builds_source "$ROOT/$lockfile" "${sources[@]}"
    local requirements="$venv/.locked-requirements.txt" log="$venv/.uv-sync.log"
    { cat "$ROOT/$lockfile"; echo "-e $ROOT"; } >"$requirements"
    echo "==> uv pip sync $lockfile into ${venv#"$ROOT"/} (with pip's sources: $(sources_of "${sources[@]}")${BUILDS:+; $BUILDS from $BUILDS_FROM})" >&2
    # Every version is pinned, so taking each from whichever source has it (not only from the first
    # index that knows the name) cannot change what is installed.
    if ! "$uv" pip sync --quiet --python "$python" --build-constraints "$ROOT/$LOCK" \
        --index-strategy unsafe-best-match "${sources[@]}" "${BUILD_ARGS[@]}" "$requirements" 2>"$log"; then
        explain_failure "$log" install "$lockfile"
    fi
    cat "$log" >&2
    rm -f "$log"
    quietly "$uv" pip check --python "$python" ||
        die "the packages in $venv do not fit together: pyproject.toml changed after the lock? run \`make lock\`"
    echo "==> $venv ready in $SECONDS s" >&2
}

# The lock's pins of builds that PyPI serves as CUDA ones, a line each: a torch without a local version
# label (PyPI's, the CUDA build on Linux) and the NVIDIA libraries such a build brings.
cuda_pins() { grep -o -E '^(torch==[^ +;]+|nvidia-[A-Za-z0-9._-]+==[^ ;]+|triton==[^ ;]+)( |;|$)' "$1" | tr -d ' ;' || true; }

lock() {
    local uv; uv=$(pinned_uv)
    cd "$ROOT"
    local -a find_links; mapfile -t find_links < <(pip_sources)
    # The current lock's builds that PyPI does not serve say where to look for them (builds_source).
    builds_source "$LOCK" "${find_links[@]}"
    local -a command=(uv pip compile pyproject.toml requirements/lock.in --all-extras
        --python-version "$LOCK_PYTHON" --python-platform "$LOCK_PLATFORM" "${find_links[@]}" "${BUILD_ARGS[@]}" "$@")
    # Compiled beside the lock (whose pins uv keeps unless told otherwise) and put in its place only if
    # it pins no CUDA build.
    local new log; new=$(mktemp "$ROOT/requirements/.lock-XXXXXX") log="$ROOT/build/uv-lock.log"
    mkdir -p "$ROOT/build"
    cp "$LOCK" "$new"
    if ! "$uv" "${command[@]:1}" -o "$new" --quiet \
        --custom-compile-command "make lock, which runs: ${command[*]} -o $LOCK" 2>"$log"; then
        rm -f "$new"
        explain_failure "$log" lock "$LOCK"
    fi
    cat "$log" >&2
    local cuda; cuda=$(cuda_pins "$new")
    if [[ -n "$cuda" ]]; then
        rm -f "$new"
        local torch place=${BUILDS_FROM:-"pip's find-links"}
        torch=$(grep -m1 '^torch==' <<<"$cuda" || head -n1 <<<"$cuda")
        die "$LOCK left as it was: uv resolved $torch from PyPI, a CUDA build ($(wc -l <<<"$cuda") pins of CUDA packages), for want of its CPU build in $place: put that wheel in a folder named in pip's find-links, or take the folder out of them so that uv asks PyTorch's CPU index $TORCH_INDEX"
    fi
    mv "$new" "$LOCK"
    echo "==> $LOCK: $(grep -c -E '^[A-Za-z0-9._-]+==' "$LOCK") packages pinned" >&2
    # What `make demo` installs: the demo's packages (requirements/demo.in) at the lock's versions, all
    # of them on PyPI.
    local -a demo=(uv pip compile pyproject.toml requirements/demo.in --constraint "$LOCK"
        --python-version "$LOCK_PYTHON" --python-platform "$LOCK_PLATFORM" -o "$DEMO_LOCK")
    "$uv" "${demo[@]:1}" --quiet --custom-compile-command "make lock, which runs: ${demo[*]}" ||
        die "uv could not compile $DEMO_LOCK from PyPI at the versions of $LOCK: the demo's packages (requirements/demo.in) must all be in the lock and on PyPI"
    echo "==> $DEMO_LOCK: $(grep -c -E '^[A-Za-z0-9._-]+==' "$DEMO_LOCK") packages pinned" >&2
    # The Kubeflow SDK pins kubernetes below the provider's range, so its test runs it in a venv of its
    # own (tests/local/test_trainjob_sdk.py), installed from this lock of its own.
    local -a sdk=(uv pip compile requirements/kubeflow-sdk.in --python-version "$LOCK_PYTHON"
        --python-platform "$LOCK_PLATFORM" "$@" -o "$SDK_LOCK")
    "$uv" "${sdk[@]:1}" --quiet --custom-compile-command "make lock, which runs: ${sdk[*]}"
    echo "==> $SDK_LOCK: $(grep -c -E '^[A-Za-z0-9._-]+==' "$SDK_LOCK") packages pinned" >&2
}

case "${1:-}" in
    install) shift; sync_venv "${1:-$ROOT/.venv}" "$LOCK" ;;
    install-demo) shift; sync_venv "${1:-$ROOT/.venv}" "$DEMO_LOCK" ;;
    lock) shift; lock "$@" ;;
    uv) pinned_uv ;;
    *) die "usage: scripts/venv.sh install [VENV] | install-demo [VENV] | lock [uv pip compile ARGS] | uv" ;;
esac
